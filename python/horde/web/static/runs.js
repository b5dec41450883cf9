"use strict";
// The runs list: a comparison takes the oldest ticked run as its baseline, so the ticked runs
// are sent oldest first (the list shows the newest first).
(function () {
  const form = document.getElementById("compare-form");
  if (!form) { return; }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const ticked = Array.from(form.querySelectorAll("input[name=run]:checked")).map(function (box) { return box.value; });
    if (ticked.length < 2) { window.alert("Tick two or more runs to compare."); return; }
    const query = ticked.reverse().map(function (id) { return "run=" + encodeURIComponent(id); }).join("&");
    window.location.href = "/compare?" + query;
  });
})();
