// Parses Mermaid diagrams with Mermaid's own parser: `node check.mjs MERMAID_DIR < blocks.json`,
// where blocks.json is a JSON list of {"where": ..., "text": ...}. Prints a JSON list of
// {"where", "type", "error"} (error null when the diagram parses), one per block.
import { register } from 'node:module';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

register('./hooks.mjs', import.meta.url);
const require = createRequire(join(process.argv[2], 'node_modules', 'package.json'));
const mermaid = (await import(pathToFileURL(require.resolve('mermaid')).href)).default;
mermaid.initialize({ startOnLoad: false });

const blocks = JSON.parse(readFileSync(0, 'utf8'));
const results = [];
for (const block of blocks) {
  try {
    const parsed = await mermaid.parse(block.text);
    results.push({ where: block.where, type: parsed.diagramType, error: null });
  } catch (error) {
    results.push({ where: block.where, type: null, error: String(error.message || error) });
  }
}
process.stdout.write(JSON.stringify(results));
