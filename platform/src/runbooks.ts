import { readFile } from 'node:fs/promises';
import { Marked } from 'marked';
import { PUBLIC, type Route } from '@ofp/http-api';

/**
 * The runbooks of the chart's alerts, served by every process at `/docs/runbooks` (each alert's
 * section at `#<alert name in lower case>`), so that the chart can give every alert a `runbook_url`
 * that opens in any deployment. Their text is the "Alerts" section of the chart's README, the one
 * copy of them (published with the chart, and copied into the image beside `platform/`).
 */
const CHART_README = new URL('../../charts/ofp/README.md', import.meta.url);

/** The page's own styles only: nothing is fetched from elsewhere. */
const CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'";

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;max-width:50rem;margin:2rem auto;padding:0 1rem;color:#1f2328}' +
  'code{background:#f0f2f4;padding:0 .2em;border-radius:3px}h3{margin-top:2rem;border-top:1px solid #d1d9e0;padding-top:1rem}';

/** A heading's anchor as GitHub and the chart's `runbook_url`s make it: `### OfpConsumerLagging` → `ofpconsumerlagging`. */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .trim()
    .replace(/\s+/g, '-');
}

/** The page of the README's "## Alerts" section, or undefined when the README has none. */
export function runbooksPage(readme: string): string | undefined {
  const section = /^## Alerts\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(readme)?.[1];
  if (section === undefined) return undefined;
  const marked = new Marked({
    renderer: {
      heading({ tokens, depth, text }) {
        return `<h${depth} id="${anchorOf(text)}">${this.parser.parseInline(tokens)}</h${depth}>\n`;
      },
    },
  });
  const body = marked.parse(section, { async: false });
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Runbooks: the platform's alerts</title>
  <style>${STYLE}</style>
</head>
<body>
<h1>Runbooks</h1>
${body}</body>
</html>
`;
}

/** `GET /docs/runbooks`: read and rendered once, at start-up. */
export async function runbookRoutes(): Promise<Route[]> {
  const page = runbooksPage(await readFile(CHART_README, 'utf8'));
  if (page === undefined) throw new Error(`${CHART_README.pathname} has no "## Alerts" section`);
  return [
    {
      method: 'GET',
      path: '/docs/runbooks',
      operationId: 'runbooks',
      summary: "What to do when one of the chart's alerts fires",
      description:
        "One section per alert of the Helm chart, each named by the alert: what it means, what to look at, what to do. The alerts' `runbook_url` links here.",
      tag: 'Operations',
      access: PUBLIC,
      responses: { 200: { description: 'The runbooks', mediaType: 'text/html' } },
      handle: () =>
        Promise.resolve({
          status: 200,
          headers: {
            'Content-Type': 'text/html; charset=utf-8',
            'Cache-Control': 'public, max-age=300',
            'Content-Security-Policy': CONTENT_SECURITY_POLICY,
          },
          body: page,
        }),
    },
  ];
}
