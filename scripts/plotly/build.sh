#!/bin/sh
# Rebuild static/plotly/plotly-benchviewer.min.js: plotly.js with only the traces comparisons/pair/charts.py
# draws (scatter, bar, box, heatmap), 1.2 MB where plotly's cartesian bundle is 1.5 MB and the full one 4.8 MB,
# and its .gz and .br beside it (WhiteNoise sends those to browsers that accept them).
# Usage: scripts/plotly/build.sh [plotly.js version]   (needs node and network for npm)
set -eu
VERSION="${1:-4.1.1}"
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$HERE/../../static/plotly/plotly-benchviewer.min.js"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cp "$HERE/entry.js" "$HERE/build.js" "$WORK/"
cd "$WORK"
echo '{"name":"plotly-benchviewer","version":"1.0.0","private":true}' > package.json
npm install --no-audit --no-fund --ignore-scripts "plotly.js@$VERSION" esbuild@0.28 esbuild-plugin-glsl@1 >/dev/null
PLOTLY_VERSION="$VERSION" node build.js
cp plotly-benchviewer.min.js "$OUT"
gzip -9 -n -k -f "$OUT"
node -e 'const z=require("zlib"),fs=require("fs"),f=process.argv[1],b=fs.readFileSync(f);
fs.writeFileSync(f+".br",z.brotliCompressSync(b,{params:{[z.constants.BROTLI_PARAM_QUALITY]:11,[z.constants.BROTLI_PARAM_SIZE_HINT]:b.length}}))' "$OUT"
ls -l "$OUT" "$OUT.gz" "$OUT.br"
