'use strict';
// Benchviewer's plotly.js: the traces comparisons/pair/charts.py draws (scatter is in core).
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/box'), require('plotly.js/lib/heatmap')]);
module.exports = Plotly;
