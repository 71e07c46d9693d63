// The index's filters: device class, part of a test id, regressions only. Plain JavaScript, no
// library, nothing fetched. The table is complete without it; the filter state lives in the
// URL's fragment (#device=...&test=...&regressions=1) so a filtered view can be linked.
"use strict";
(function () {
  var form = document.getElementById("filters");
  var table = document.getElementById("series");
  if (!form || !table) {
    return;
  }
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  var shown = document.getElementById("shown");
  var device = form.elements.namedItem("device");
  var test = form.elements.namedItem("test");
  var regressions = form.elements.namedItem("regressions");

  function apply() {
    var wanted = test.value.trim().toLowerCase();
    var count = 0;
    rows.forEach(function (row) {
      var visible =
        (!device.value || row.dataset.device === device.value) &&
        (!wanted || row.dataset.test.toLowerCase().indexOf(wanted) !== -1) &&
        (!regressions.checked || row.dataset.kind === "regression");
      row.hidden = !visible;
      if (visible) {
        count += 1;
      }
    });
    shown.textContent = count + " of " + rows.length + " measurements";
  }

  function save() {
    var state = new URLSearchParams();
    if (device.value) state.set("device", device.value);
    if (test.value) state.set("test", test.value);
    if (regressions.checked) state.set("regressions", "1");
    var fragment = state.toString();
    history.replaceState(null, "", fragment ? "#" + fragment : location.pathname + location.search);
  }

  function load() {
    var state = new URLSearchParams(location.hash.replace(/^#/, ""));
    var wanted = state.get("device") || "";
    device.value = Array.prototype.some.call(device.options, function (o) { return o.value === wanted; }) ? wanted : "";
    test.value = state.get("test") || "";
    regressions.checked = state.get("regressions") === "1";
  }

  form.addEventListener("input", function () { apply(); save(); });
  form.addEventListener("change", function () { apply(); save(); });
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  window.addEventListener("hashchange", function () { load(); apply(); });
  load();
  apply();
  form.hidden = false;
})();

// A series page's statistic choice: one chart at a time, the chosen one in the URL's fragment
// (#stat-...), so a link opens that statistic. Without the script every chart is shown.
(function () {
  var nav = document.getElementById("statistics");
  var charts = document.getElementById("charts");
  if (!nav || !charts) {
    return;
  }
  var choice = nav.querySelector("select");
  var blocks = Array.prototype.slice.call(charts.querySelectorAll(".chart-block"));

  function show(anchor) {
    var found = blocks.some(function (b) { return b.id === anchor; }) ? anchor : blocks[0].id;
    blocks.forEach(function (b) { b.classList.toggle("shown", b.id === found); });
    choice.value = found;
  }

  choice.addEventListener("change", function () {
    history.replaceState(null, "", "#" + choice.value);
    show(choice.value);
  });
  window.addEventListener("hashchange", function () { show(location.hash.replace(/^#/, "")); });
  charts.classList.add("one-statistic");
  choice.hidden = false;
  show(location.hash.replace(/^#/, ""));
})();
