"use strict";
// Charts over the run's time axis (layout.meta "time-axis", set by horde.report.charts) zoom
// together: a zoom, pan or reset on one moves every other one to the same seconds, so the
// target's figures (monitors) line up with latency and rate by eye. Shared by the report (inlined)
// and the dashboard (served as /static/linked_axes.js).
window.HordeLinkedAxes = (function () {
  // Set while the other charts are being moved: their own relayout events must not echo back.
  let moving = false;

  function onTimeAxis(element) {
    return !!(element && element.data && element.layout && element.layout.meta === "time-axis");
  }

  function rangeOf(event) {
    if (event["xaxis.autorange"]) { return {"xaxis.autorange": true}; }
    if (event["xaxis.range[0]"] !== undefined && event["xaxis.range[1]"] !== undefined) {
      return {"xaxis.range": [event["xaxis.range[0]"], event["xaxis.range[1]"]]};
    }
    if (Array.isArray(event["xaxis.range"])) { return {"xaxis.range": event["xaxis.range"].slice()}; }
    return null;
  }

  function follow(element) {
    if (!element || !element.on || element.dataset.linkedAxes) { return; }
    element.dataset.linkedAxes = "1";
    element.on("plotly_relayout", function (event) {
      if (moving || !onTimeAxis(element)) { return; }
      const update = rangeOf(event || {});
      if (!update) { return; }
      const others = Array.from(document.querySelectorAll(".chart")).filter(function (other) {
        return other !== element && onTimeAxis(other);
      });
      moving = true;
      Promise.all(others.map(function (other) { return Plotly.relayout(other, update); }))
        .finally(function () { moving = false; });
    });
  }

  return {follow: follow, onTimeAxis: onTimeAxis};
})();
