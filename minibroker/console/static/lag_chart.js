// The consumer group page's chart of lag over the last minutes (uPlot, vendored: uplot.VERSION).
(function () {
  "use strict";
  var box = document.getElementById("lag-chart");
  if (!box || typeof uPlot === "undefined") return;
  var COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf"];
  var chart = null, names = "";
  window.lagChart = {data: null};

  function draw(d) {
    var keys = Object.keys(d.series).sort();
    var data = [d.t, d.total].concat(keys.map(function (k) { return d.series[k]; }));
    window.lagChart.data = {t: d.t, total: d.total, series: d.series};
    if (chart && names === keys.join("|")) { chart.setData(data); return; }
    if (chart) chart.destroy();
    names = keys.join("|");
    var series = [{}, {label: "total lag", stroke: "#000", width: 2}].concat(keys.map(function (k, i) {
      return {label: k, stroke: COLORS[i % COLORS.length], width: 1};
    }));
    chart = new uPlot({width: Math.min(960, box.clientWidth || 800), height: 260, series: series,
                       scales: {y: {range: function (u, min, max) { return [0, Math.max(10, max)]; }}},
                       axes: [{}, {label: "lag (records)"}]}, data, box);
  }

  function tick() {
    if (document.hidden) return;
    fetch(box.dataset.url).then(function (r) { return r.json(); }).then(draw).catch(function () {});
  }
  tick();
  setInterval(tick, 1000);
})();
