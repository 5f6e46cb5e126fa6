import { runbooksPage } from './runbooks.js';

// That every alert of the chart has its section, at the anchor of its runbook_url, is checked on the
// rendered rules by scripts/chart-check.sh.
describe('the runbooks page', () => {
  it('renders only the Alerts section, its headings anchored as GitHub anchors them', () => {
    const page = runbooksPage(
      '# Chart\n\n## Alerts\n\n### OfpThing Down\n\nDo `this`.\n\n## Values\n\nnot shown\n',
    );
    expect(page).toContain('<h3 id="ofpthing-down">OfpThing Down</h3>');
    expect(page).toContain('<code>this</code>');
    expect(page).not.toContain('not shown');
    expect(runbooksPage('# Chart without alerts\n')).toBeUndefined();
  });
});
