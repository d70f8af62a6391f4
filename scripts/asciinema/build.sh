#!/bin/sh
# Vendor asciinema's web player into static/asciinema/: the npm package's prebuilt bundle
# (asciinema-player.min.js, asciinema-player.css), with .gz and .br beside the script for WhiteNoise.
# No CDN: the trial page plays a TB1 terminal recording (.cast) from our own static files.
# Usage: scripts/asciinema/build.sh [asciinema-player version]   (needs node and network for npm)
set -eu
VERSION="${1:-3.18.0}"
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$HERE/../../static/asciinema"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
echo '{"name":"asciinema-benchviewer","version":"1.0.0","private":true}' > package.json
npm install --no-audit --no-fund --ignore-scripts "asciinema-player@$VERSION" >/dev/null
mkdir -p "$OUT"
cp node_modules/asciinema-player/dist/bundle/asciinema-player.min.js node_modules/asciinema-player/dist/bundle/asciinema-player.css "$OUT/"
cp node_modules/asciinema-player/LICENSE "$OUT/LICENSE" 2>/dev/null || true
echo "asciinema-player $VERSION (npm), dist/bundle" > "$OUT/VERSION"
gzip -9 -n -k -f "$OUT/asciinema-player.min.js"
node -e 'const z=require("zlib"),fs=require("fs"),f=process.argv[1],b=fs.readFileSync(f);
fs.writeFileSync(f+".br",z.brotliCompressSync(b,{params:{[z.constants.BROTLI_PARAM_QUALITY]:11,[z.constants.BROTLI_PARAM_SIZE_HINT]:b.length}}))' "$OUT/asciinema-player.min.js"
ls -l "$OUT"
