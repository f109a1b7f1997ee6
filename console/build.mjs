// Builds the console into OUTDIR: index.html plus console-HASH.js and
// console-HASH.css (names carry a content hash, so they can be cached
// forever; index.html is the only file whose name stays).
//   node build.mjs OUTDIR
import * as esbuild from 'esbuild';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = process.argv[2];
if (!outdir) {
  console.error('usage: node build.mjs OUTDIR');
  process.exit(2);
}
const out = path.resolve(outdir);
await mkdir(out, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: [path.join(here, 'src/main.js')],
  bundle: true,
  format: 'esm',
  target: ['es2022', 'chrome110', 'firefox115', 'safari16'],
  minify: true,
  legalComments: 'linked',
  splitting: true, // the YAML library loads with the job page only
  entryNames: 'console-[hash]',
  chunkNames: 'console-[hash]',
  assetNames: 'console-[hash]',
  outdir: out,
  metafile: true,
  write: false,
  logLevel: 'warning',
});

const written = new Set(['index.html']);
let js = '';
let css = '';
for (const f of result.outputFiles) {
  written.add(path.basename(f.path));
  await writeFile(f.path, f.contents);
}
// Dynamically imported modules are entry points too: index.html wants main.js's.
let preload = [];
for (const [file, meta] of Object.entries(result.metafile.outputs)) {
  if (!meta.entryPoint || path.resolve(here, meta.entryPoint) !== path.join(here, 'src/main.js')) continue;
  if (file.endsWith('.js')) js = path.basename(file);
  if (meta.cssBundle) css = path.basename(meta.cssBundle);
  // The chunks main.js imports statically load with it, not after it.
  preload = meta.imports.filter((i) => i.kind === 'import-statement').map((i) => path.basename(i.path));
}
if (!js || !css) {
  console.error(`build.mjs: esbuild wrote no ${js ? 'CSS' : 'JavaScript'} bundle`);
  process.exit(1);
}
const template = await readFile(path.join(here, 'index.html'), 'utf8');
const preloads = preload.map((p) => `<link rel="modulepreload" href="${p}">`).join('\n');
await writeFile(
  path.join(out, 'index.html'),
  template.replace('%JS%', js).replace('%CSS%', css).replace('%PRELOAD%', preloads),
);

// Bundles of earlier builds go, so the directory holds one consistent set.
for (const name of await readdir(out)) {
  if (!written.has(name) && /^console-[A-Z0-9]+\./.test(name)) await rm(path.join(out, name));
}
console.log(`console: ${[...written].sort().join(' ')} -> ${out}`);
