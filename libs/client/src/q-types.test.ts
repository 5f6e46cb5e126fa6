import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const FIXTURE = fileURLToPath(new URL('./q-types.fixture.ts', import.meta.url));
const DIRECTIVE = /^\s*\/\/ @ts-expect-error (.*)$/;

let previous: ts.Program | undefined;

/**
 * The compiler's errors in the fixture, by line (1-based), when its text is `text`; each program
 * reuses the one before (only the fixture differs), which halves the second compile.
 */
function errorsByLine(text: string): Map<number, string[]> {
  const config = ts.getParsedCommandLineOfConfigFile(
    fileURLToPath(new URL('../tsconfig.json', import.meta.url)),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} },
  )!;
  const host = ts.createCompilerHost(config.options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, ...rest) =>
    name === FIXTURE ? ts.createSourceFile(name, text, language) : read(name, language, ...rest);
  const program = ts.createProgram(
    [FIXTURE],
    { ...config.options, noEmit: true, composite: false },
    host,
    previous,
  );
  previous = program;
  const errors = new Map<number, string[]>();
  for (const diagnostic of ts.getPreEmitDiagnostics(program, program.getSourceFile(FIXTURE))) {
    const line = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start!).line + 1;
    errors.set(line, [
      ...(errors.get(line) ?? []),
      ts.flattenDiagnosticMessageText(diagnostic.messageText, ' '),
    ]);
  }
  return errors;
}

describe('q and the other arguments of OfpClient, typed per model from the registry', () => {
  const text = readFileSync(FIXTURE, 'utf8');
  const lines = text.split('\n');
  const marked = lines.flatMap((line, index) => (DIRECTIVE.test(line) ? [index + 2] : []));

  it('compiles the uses, each misuse refused where it is marked', () => {
    expect(marked.length).toBeGreaterThanOrEqual(15);
    expect([...errorsByLine(text)]).toEqual([]);
  }, 120_000);

  it('refuses each marked misuse on its own: without its directive, that line is an error', () => {
    const stripped = lines.map((line) => (DIRECTIVE.test(line) ? '' : line)).join('\n');
    const errors = errorsByLine(stripped);
    const unrefused = marked.filter((line) => !errors.has(line)).map((line) => lines[line - 1]!.trim());
    expect(unrefused).toEqual([]);
    // And nothing else fails: the errors are the misuses' own.
    expect([...errors.keys()].filter((line) => !marked.includes(line))).toEqual([]);
  }, 120_000);
});
