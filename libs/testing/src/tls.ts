import { generateKeyPairSync, randomBytes } from 'node:crypto';
import forge from 'node-forge';

/** A certificate and its private key, both PEM (the key PKCS #8, unencrypted). */
export interface PemPair {
  readonly cert: string;
  readonly key: string;
}

export interface CertificateAuthority extends PemPair {
  /** Issues a certificate for 127.0.0.1 and localhost, good for a TLS server and client alike. */
  issue(commonName: string): PemPair;
}

// A day is enough for any test run; a minute in the past so that a clock a little behind accepts it.
const VALIDITY_MS = 24 * 3600 * 1000;

/**
 * A throwaway certificate authority for the tests' TLS listeners (the SASL_SSL Kafka broker), made
 * fresh in memory: keys by Node's crypto, certificates by node-forge (Node cannot sign one).
 */
export function createCertificateAuthority(name: string): CertificateAuthority {
  const caKeys = keyPair();
  const caName = [{ name: 'commonName', value: name }];
  const ca = certificate(caName, caName, caKeys.publicKey, caKeys.forgePrivate, [
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  return {
    cert: forge.pki.certificateToPem(ca),
    key: caKeys.pem,
    issue(commonName) {
      const leaf = keyPair();
      const issued = certificate(
        [{ name: 'commonName', value: commonName }],
        caName,
        leaf.publicKey,
        caKeys.forgePrivate,
        [
          { name: 'basicConstraints', cA: false, critical: true },
          { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
          { name: 'extKeyUsage', serverAuth: true, clientAuth: true },
          {
            name: 'subjectAltName',
            altNames: [
              { type: 7, ip: '127.0.0.1' },
              { type: 2, value: 'localhost' },
            ],
          },
          { name: 'authorityKeyIdentifier', keyIdentifier: ca.generateSubjectKeyIdentifier().getBytes() },
        ],
      );
      return { cert: forge.pki.certificateToPem(issued), key: leaf.pem };
    },
  };
}

function keyPair(): { pem: string; publicKey: forge.pki.PublicKey; forgePrivate: forge.pki.rsa.PrivateKey } {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return {
    pem: privateKey,
    publicKey: forge.pki.publicKeyFromPem(publicKey),
    forgePrivate: forge.pki.privateKeyFromPem(privateKey),
  };
}

function certificate(
  subject: forge.pki.CertificateField[],
  issuer: forge.pki.CertificateField[],
  publicKey: forge.pki.PublicKey,
  signingKey: forge.pki.rsa.PrivateKey,
  extensions: object[],
): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  // Positive (a leading 0 bit) and unique, as RFC 5280 asks.
  cert.serialNumber = `01${randomBytes(15).toString('hex')}`;
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + VALIDITY_MS);
  cert.setSubject(subject);
  cert.setIssuer(issuer);
  cert.setExtensions(extensions);
  cert.sign(signingKey, forge.md.sha256.create());
  return cert;
}
