// esbuild settings of plotly.js's own build (its esbuild-config.js), minified, for entry.js.
const esbuild = require('esbuild');
const { glsl } = require('esbuild-plugin-glsl');

const version = process.env.PLOTLY_VERSION;
esbuild
  .build({
    entryPoints: ['./entry.js'],
    outfile: './plotly-benchviewer.min.js',
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    legalComments: 'none',
    banner: {
      js: `/**\n* plotly.js v${version} (Benchviewer partial bundle: scatter, bar, box, heatmap; scripts/plotly/)\n` +
        '* Copyright 2012-2026, Plotly, Inc.\n* All rights reserved.\n* Licensed under the MIT license\n*/',
    },
    plugins: [glsl({ minify: true })],
    alias: { regl: '@plotly/regl' },
    define: { global: 'window', 'define.amd': 'false', 'process.env.NODE_DEBUG': 'false' },
    target: 'es2016',
    logLevel: 'warning',
  })
  .catch(() => process.exit(1));
