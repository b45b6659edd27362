"""The site's style sheet and its one script of its own (the selectors), written once under
site/assets/ by `dlperf publish` and referenced relatively: they work from file://, with no
server and no network."""

from __future__ import annotations

CSS = """\
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px;
       padding: 0 1em; color: #1d1d1f; line-height: 1.4; box-sizing: border-box; }
nav { margin-bottom: 1em; font-size: 0.9em; }
nav a { margin-right: 1.2em; }
table { border-collapse: collapse; margin: 0.5em 0 1.2em; font-size: 0.85em; max-width: 100%; }
th, td { border: 1px solid #d0d0d7; padding: 0.25em 0.5em; text-align: left;
         vertical-align: top; overflow-wrap: break-word; }
th { background: #f2f2f7; }
tr:nth-child(even) td { background: #fafafc; }
code { font-size: 0.9em; overflow-wrap: anywhere; }
blockquote { border-left: 4px solid #e0a800; margin: 0; padding: 0.2em 1em; background: #fff8e1; }
details { margin: 0.6em 0; }
details > summary { cursor: pointer; font-weight: 600; }
.chart { width: 100%; height: 480px; margin: 0.5em 0 1.5em; }
.note { color: #555; font-size: 0.9em; }
.overview { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr));
            gap: 0.5em 1em; }
.overview .chart-box { min-width: 0; }
.selectors { position: sticky; top: 0; z-index: 10; background: #fffffff0; padding: 0.4em 0;
             border-bottom: 1px solid #d0d0d7; margin-bottom: 0.8em; font-size: 0.9em; }
.selectors label { margin-right: 1.2em; white-space: nowrap; }
.selectors select { max-width: 22em; }
[hidden] { display: none !important; }
.regression { color: #b00020; font-weight: 600; }
.improvement { color: #1b7f3b; font-weight: 600; }
"""

# The page's selectors: one <select> per key of `look.select_keys` with more than one value
# among the page's table rows (data-* attributes) and chart points (each trace's
# meta.select, one entry per point); a key with one value is no choice and not offered (no
# key with two: no selectors at all). A machine is offered by its name (the box's data-names,
# as the page names it). Choosing a value hides the rows that do not match and keeps only the
# matching points of each chart (the per-point arrays restyled from the trace's original
# ones); a trace without meta.select and a row without data-* attributes stay as they are.
# Choosing a machine hides every other machine's whole section (data-machine-section:
# headings, tables, charts); a chart left with no point is hidden, not drawn as empty axes.
SELECT_JS = r"""
(function () {
  "use strict";
  var KEYS = ["machine", "precision", "mode", "version", "settings"];
  var LABELS = {machine: "machine", precision: "precision", mode: "mode",
                version: "framework version", settings: "settings"};
  var NESTED = ["marker", "marker.line", "marker.pattern", "error_y", "error_x", "line"];
  var chosen = {};

  function charts() {
    return Array.prototype.slice.call(document.querySelectorAll(".plotly-graph-div"));
  }
  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("tr[data-machine]"));
  }
  function matches(keys) {
    return KEYS.every(function (k) {
      return !chosen[k] || (keys && keys[k] === chosen[k]);
    });
  }
  function perPoint(trace, n) {
    // The trace's arrays with one entry per point: "x", "marker.color", "error_y.array" ...
    var found = {};
    function visit(obj, prefix) {
      if (!obj || typeof obj !== "object") return;
      Object.keys(obj).forEach(function (key) {
        var value = obj[key], path = prefix ? prefix + "." + key : key;
        if (key === "meta") return;
        if (Array.isArray(value) && value.length === n) found[path] = value.slice();
        else if (NESTED.indexOf(path) >= 0) visit(value, path);
      });
    }
    visit(trace, "");
    return found;
  }
  function inHiddenSection(element) {
    var section = element.closest("[data-machine-section]");
    return !!(section && section.hidden);
  }
  function filterChart(div) {
    if (inHiddenSection(div)) return;  // filtered when its section is shown again
    var carries = false, kept = false;
    var keeps = (div.data || []).map(function (trace) {
      var select = trace.meta && trace.meta.select;
      if (!Array.isArray(select)) return null;
      var keep = select.map(function (keys) { return matches(keys); });
      carries = carries || select.length > 0;
      kept = kept || keep.some(Boolean);
      return keep;
    });
    var box = div.closest(".chart-box") || div;
    var empty = carries && !kept;
    var wasHidden = box.hidden;
    box.hidden = empty;  // no point of this chart is chosen: no empty axes either
    if (empty) return;
    (div.data || []).forEach(function (trace, i) {
      var keep = keeps[i];
      if (!keep) return;
      div._dlperfOriginal = div._dlperfOriginal || {};
      var original = div._dlperfOriginal[i];
      if (!original) original = div._dlperfOriginal[i] = perPoint(trace, keep.length);
      var update = {};
      Object.keys(original).forEach(function (path) {
        update[path] = [original[path].filter(function (_, j) { return keep[j]; })];
      });
      if (Object.keys(update).length) Plotly.restyle(div, update, [i]);
    });
    if (wasHidden) Plotly.Plots.resize(div);
  }
  function sections() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-machine-section]"));
  }
  var touched = false;  // charts are restyled from the first choice on, never at load
  function apply() {
    rows().forEach(function (row) { row.hidden = !matches(row.dataset); });
    var shownAgain = [];
    sections().forEach(function (section) {
      var hide = !!chosen.machine && section.dataset.machineSection !== chosen.machine;
      if (section.hidden && !hide) shownAgain.push(section);
      section.hidden = hide;
    });
    touched = touched || KEYS.some(function (k) { return chosen[k]; });
    if (touched && typeof Plotly === "object") {
      charts().forEach(filterChart);
      shownAgain.forEach(function (section) {
        section.querySelectorAll(".plotly-graph-div").forEach(function (div) {
          if (!div.closest("[hidden]")) Plotly.Plots.resize(div);
        });
      });
    }
    var shown = document.getElementById("selectors-shown");
    if (shown) {
      var all = rows();
      var visible = all.filter(function (r) { return !r.hidden; }).length;
      shown.textContent = visible + " of " + all.length + " table rows shown";
    }
  }
  function values() {
    var found = {};
    KEYS.forEach(function (k) { found[k] = []; });
    function add(keys) {
      KEYS.forEach(function (k) {
        var v = keys && keys[k];
        if (v !== undefined && v !== null && found[k].indexOf(String(v)) < 0) {
          found[k].push(String(v));
        }
      });
    }
    rows().forEach(function (row) { add(row.dataset); });
    charts().forEach(function (div) {
      (div.data || []).forEach(function (trace) {
        var select = trace.meta && trace.meta.select;
        if (Array.isArray(select)) select.forEach(add);
      });
    });
    KEYS.forEach(function (k) { found[k].sort(); });
    return found;
  }
  function names(box) {
    try {
      return JSON.parse(box.dataset.names || "{}") || {};
    } catch (e) {
      return {};
    }
  }
  function build(box) {
    var found = values(), named = names(box), offered = 0;
    KEYS.forEach(function (k) {
      if (found[k].length < 2) return;  // one value is no choice
      offered += 1;
      var label = document.createElement("label");
      label.appendChild(document.createTextNode(LABELS[k] + " "));
      var select = document.createElement("select");
      select.name = k;
      select.dataset.key = k;
      var all = document.createElement("option");
      all.value = "";
      all.textContent = "all (" + found[k].length + ")";
      select.appendChild(all);
      var shown = named[k] || {};
      var text = function (v) { return shown[v] || v; };
      found[k].slice().sort(function (a, b) {
        return text(a) < text(b) ? -1 : text(a) > text(b) ? 1 : 0;
      }).forEach(function (v) {
        var option = document.createElement("option");
        option.value = v;
        option.textContent = text(v);
        select.appendChild(option);
      });
      select.addEventListener("change", function () {
        chosen[k] = select.value;
        apply();
      });
      label.appendChild(select);
      box.appendChild(label);
    });
    if (!offered) {  // nothing to choose: no bar of empty selectors
      box.hidden = true;
      return;
    }
    var shown = document.createElement("span");
    shown.id = "selectors-shown";
    shown.className = "note";
    box.appendChild(shown);
    apply();
  }
  function start() {
    var box = document.getElementById("selectors");
    if (box) build(box);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  window.dlperfSelect = {choose: function (key, value) {
    chosen[key] = value;
    var select = document.querySelector('#selectors select[data-key="' + key + '"]');
    if (select) select.value = value;
    apply();
  }};
})();
"""
