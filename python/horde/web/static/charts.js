"use strict";
// Draws the report's figures (plotly figure dicts made by horde.report.charts) into the elements
// of the same id, and applies the live stream's changes to them: new points, a trace redrawn,
// layout keys, or a whole chart (horde.web.run_view.FigureDeltas says which).
window.HordeCharts = (function () {
  const CONFIG = {displaylogo: false, responsive: true};

  function draw(element, figure) {
    // uirevision: a redraw keeps what the reader did (zoom, hidden traces).
    const layout = Object.assign({}, figure.layout, {uirevision: "horde"});
    // Then zoomed with the other charts over the run's time axis (linked_axes.js).
    Plotly.react(element, figure.data, layout, CONFIG).then(HordeLinkedAxes.follow);
  }

  function drawAll(figures) {
    for (const [id, figure] of Object.entries(figures || {})) {
      const element = document.getElementById(id);
      if (element) { draw(element, figure); }
    }
  }

  function apply(changes) {
    for (const [id, change] of Object.entries(changes || {})) {
      const element = document.getElementById(id);
      if (!element) { continue; }
      if (change.replace) { draw(element, change.replace); continue; }
      if (!element.data) { continue; } // never drawn: the next whole state will draw it
      if (change.extend) {
        Plotly.extendTraces(element, {x: change.extend.x, y: change.extend.y}, change.extend.indices);
      }
      for (const trace of change.restyle || []) {
        Plotly.restyle(element, {x: [trace.x], y: [trace.y]}, [trace.index]);
      }
      if (change.relayout) { Plotly.relayout(element, change.relayout); }
    }
  }

  function drawEmbedded(scriptId) {
    const holder = document.getElementById(scriptId);
    if (holder) { drawAll(JSON.parse(holder.textContent)); }
  }

  return {drawAll: drawAll, apply: apply, drawEmbedded: drawEmbedded};
})();
