"use strict";
// A run's page. A finished run is read once from /api/runs/RUN; a running one follows
// /api/runs/RUN/events (server-sent events): a whole state first, then each second's changes,
// then "end", after which the finished run is read once more (its verdicts are stored at the end).
// Numbers are written as the summary holds them, so the table reads as `horde show --json`.
(function () {
  const root = document.getElementById("run");
  const runId = root.dataset.runId;
  const api = "/api/runs/" + encodeURIComponent(runId);
  const plan = JSON.parse(document.getElementById("run-plan").textContent);
  const FIELDS = ["requests", "errors", "error_percent", "rps", "p50", "p90", "p95", "p99", "max"];
  const LATENCY = ["p50", "p90", "p95", "p99", "max"];
  const SECTIONS = {autostop: "Autostop", sight: "Sighting shot"};
  // A verdict's mark: judged on the whole run (passed, failed), or on its seconds so far.
  const MARKS = {passed: "✓", failed: "✗", passing: "✓", failing: "✗", pending: "…"};
  let source = null;

  function shown(value) {
    if (value === null || value === undefined) { return "—"; }
    if (typeof value === "boolean") { return value ? "yes" : "no"; }
    if (typeof value === "object") { return JSON.stringify(value); }
    return String(value);
  }

  function element(tag, attributes, children) {
    const made = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) { made.setAttribute(name, value); }
    for (const child of children || []) {
      made.append(child instanceof Node ? child : document.createTextNode(shown(child)));
    }
    return made;
  }

  // A figure where one exists: latency only over responses, an error share only over requests
  // (the summary writes 0 for both when there were none).
  function measured(figures, field) {
    if (LATENCY.includes(field) && figures.responses === 0) { return null; }
    if (field === "error_percent" && figures.requests === 0) { return null; }
    return figures[field];
  }

  function problem(message) {
    const where = document.getElementById("problem");
    where.textContent = message || "";
    where.hidden = !message;
  }

  function renderStatus(state) {
    const status = state.run.status;
    root.dataset.status = status;
    const badge = document.getElementById("status");
    badge.textContent = status;
    badge.className = "status status-" + status;
    const now = state.now || {};
    const parts = ["second " + state.last_second];
    if (state.elapsed_s !== null && state.elapsed_s !== undefined) { parts.push(state.elapsed_s.toFixed(1) + " s since start"); }
    if (now.active_vus !== null && now.active_vus !== undefined) { parts.push(now.active_vus + " VUs active"); }
    if (now.target_rate_per_s !== null && now.target_rate_per_s !== undefined) { parts.push("target " + now.target_rate_per_s + " arrivals/s"); }
    if (status === "running") { parts.push("updated " + new Date().toLocaleTimeString()); }
    document.getElementById("progress").textContent = parts.join(" · ");
    document.getElementById("controls").hidden = status !== "running";
    // The thresholds' verdict beside the status: a finished run may still have failed them.
    const judged = (state.thresholds || []).filter(function (row) { return row.verdict === "passed" || row.verdict === "failed"; });
    let verdict = document.getElementById("verdict");
    if (!verdict) {
      verdict = element("span", {id: "verdict"}, []);
      badge.after(" ", verdict);
    }
    verdict.hidden = !judged.length;
    verdict.dataset.verdict = state.thresholds_failed ? "failed" : "passed";
    verdict.className = "status status-" + (state.thresholds_failed ? "failed" : "finished");
    verdict.textContent = state.thresholds_failed
      ? "✗ " + state.thresholds_failed + " of " + judged.length + " thresholds failed"
      : "✓ thresholds passed";
  }

  function renderHeadline(summary) {
    const latency = summary.latency_ms || {};
    const timed = summary.responses !== 0; // no response: no latency (the summary's 0 ms is none)
    const generator = summary.generator || {};
    const figures = [
      ["requests", "requests", summary.requests], ["rps", "req/s", summary.rps],
      ["errors", "errors", shown(summary.errors) + (summary.requests === 0 ? "" : " (" + shown(summary.error_percent) + " %)")],
      ["p50", "p50 ms", timed ? latency.p50 : null], ["p95", "p95 ms", timed ? latency.p95 : null],
      ["p99", "p99 ms", timed ? latency.p99 : null],
      ["peak_vus", "peak VUs", summary.peak_vus], ["iterations", "iterations", summary.iterations],
      ["dropped_arrivals", "dropped arrivals", summary.dropped_arrivals],
      ["cpu_percent_max", "generator CPU max %", generator.cpu_percent_max],
      ["timer_lateness_p99_ms", "timer lateness p99 ms", generator.timer_lateness_p99_ms],
    ];
    document.getElementById("headline").replaceChildren(...figures.map(function ([field, label, value]) {
      return element("div", {"data-field": field}, [element("span", {class: "muted"}, [label]), element("b", {}, [value])]);
    }));
  }

  function renderSteps(rows) {
    const body = document.querySelector("#steps tbody");
    body.replaceChildren(...rows.map(function (row, index) {
      const total = row.name === plan.all_requests && index === rows.length - 1;
      const cells = [element("td", {class: "name"}, [row.name]), element("td", {}, [row.kind])];
      for (const field of FIELDS) { cells.push(element("td", {"data-field": field}, [measured(row, field)])); }
      return element("tr", {"data-step": row.name, class: total ? "total" : row.kind}, cells);
    }));
  }

  function renderErrors(summary) {
    const kinds = Object.entries(summary.errors_by_kind || {});
    const where = document.getElementById("errors-by-kind");
    where.replaceChildren(...(kinds.length ? ["errors by kind: "] : []).concat(kinds.flatMap(function ([kind, count], index) {
      return [element("code", {}, [kind]), " " + count + (index < kinds.length - 1 ? ", " : "")];
    })));
    // The first distinct messages of each kind, then k6's list of checks.
    const details = (summary.error_details || []).map(function (detail) {
      return element("li", {"data-kind": detail.kind}, [element("code", {}, [detail.kind]), ": " + detail.message + " — " + detail.count]);
    });
    const checks = (summary.checks || []).map(function (check) {
      return element("li", {class: check.failures ? "failed" : "passed"}, [
        (check.failures ? "✗ " : "✓ ") + check.step + ": " + check.check + " — " + check.pass_percent.toFixed(2) +
        " % passed (" + check.passes + " ✓ / " + check.failures + " ✗)"]);
    });
    let list = document.getElementById("error-details");
    if (!list) {
      list = element("div", {id: "error-details"}, []);
      where.after(list);
    }
    list.replaceChildren(element("ul", {}, details), element("ul", {id: "checks"}, checks));
  }

  function sectionTable(key, value) {
    if (Array.isArray(value) && value.every(function (item) { return item && typeof item === "object"; })) {
      const columns = [...new Set(value.flatMap(Object.keys))];
      return element("table", {class: "section", "data-section": key}, [
        element("thead", {}, [element("tr", {}, columns.map(function (column) { return element("th", {class: "name"}, [column]); }))]),
        element("tbody", {}, value.map(function (record) {
          const verdict = "passed" in record ? {class: record.passed ? "passed" : "failed"} : {};
          return element("tr", verdict, columns.map(function (column) { return element("td", {class: "name"}, [column in record ? record[column] : ""]); }));
        })),
      ]);
    }
    if (value && typeof value === "object") {
      return element("table", {class: "section", "data-section": key}, Object.entries(value).map(function ([name, item]) {
        return element("tr", {}, [element("th", {class: "name"}, [name]), element("td", {class: "name"}, [item])]);
      }));
    }
    return element("p", {"data-section": key}, [value]);
  }

  function renderSections(state) {
    const summary = state.summary;
    const parts = [];
    for (const [key, title] of Object.entries(SECTIONS)) {
      if (summary[key] !== undefined && summary[key] !== null) {
        parts.push(element("h2", {id: "section-" + key}, [title]), sectionTable(key, summary[key]));
      }
    }
    const capacity = state.capacity;
    if (capacity) {
      // The answer's facts, its table (find-max's steps, or target response time's readings)
      // with each row's verdict, and its charts (their figures come with the finished run's state).
      parts.push(element("h2", {id: "section-capacity"}, ["Capacity"]),
        element("table", {class: "section", "data-section": "capacity"}, capacity.facts.map(function ([label, value]) {
          return element("tr", {}, [element("th", {class: "name"}, [label]), element("td", {class: "name"}, [value])]);
        })));
      if (capacity.steps.length) {
        parts.push(element("table", {class: "section", "data-section": capacity.table}, [
          element("thead", {}, [element("tr", {}, capacity.columns.map(function (column) { return element("th", {class: "name"}, [column]); }))]),
          element("tbody", {}, capacity.steps.map(function (row, index) {
            return element("tr", {class: capacity.passed[index] ? "passed" : "failed"},
              capacity.columns.map(function (column) { return element("td", {class: "name"}, [row[column]]); }));
          })),
        ]));
      }
      if (capacity.chart_note) {
        parts.push(element("p", {class: "muted", id: "capacity-chart-note"}, [capacity.chart_note]));
      }
      for (const chart of capacity.charts) { parts.push(element("div", {class: "chart", id: chart})); }
    }
    const study = state.scale_study;
    if (study) {
      // A run of a scalability study: the study's answer and its chart (a figure, drawn with the others).
      parts.push(element("h2", {id: "section-scale-study"}, ["Scalability study " + study.study_id]),
        element("p", {id: "scale-study-answer"}, [study.answer]),
        element("p", {class: "muted"}, ["Its runs: " + study.runs.map(function (run) {
          return run.count + " × " + run.run_id; }).join(", ")]),
        element("div", {class: "chart", id: "chart-scalability"}));
    }
    const cluster = summary.cluster;
    if (cluster) {
      // A run over several generators: how they were chosen, each one, and any lost.
      parts.push(element("h2", {id: "section-cluster"}, ["Cluster"]),
        sectionTable("cluster", {provision: cluster.provision, "max start skew ms": cluster.max_start_skew_ms,
                                 "lost share": cluster.lost_share}),
        sectionTable("cluster-generators", cluster.generators));
      if (cluster.lost && cluster.lost.length) { parts.push(sectionTable("cluster-lost", cluster.lost)); }
    } else if (state.generators) {
      parts.push(element("h2", {id: "section-generators"}, ["Generators (last second)"]),
        sectionTable("generators", state.generators));
    }
    const thresholds = state.thresholds || [];
    if (thresholds.length) {
      // Once the run ends, the verdicts judged on the whole stored run; meanwhile, where each
      // condition stands on the seconds so far.
      const running = state.run.status === "running";
      parts.push(element("h2", {id: "section-thresholds"},
                         [running ? "Thresholds (so far; judged on the whole run when it ends)" : "Thresholds"]),
        element("ul", {id: "thresholds", class: "verdicts"}, thresholds.map(function (row) {
          return element("li", {class: row.verdict, "data-verdict": row.verdict}, [
            element("span", {class: "mark"}, [MARKS[row.verdict] || ""]), " ", element("code", {}, [row.condition]),
            " — " + row.verdict + (row.detail ? ": " + row.detail : "")]);
        })));
    }
    const rules = state.run.autostop_rules || [];
    if (state.run.status === "running" && rules.length) {
      parts.push(element("h2", {}, ["Autostop (watched each second)"]),
        element("ul", {id: "planned-autostop"}, rules.map(function (rule) { return element("li", {}, [element("code", {}, [rule])]); })));
    }
    document.getElementById("sections").replaceChildren(...parts);
  }

  function renderMonitors(monitors) {
    // The target's side: the diagnosis sentences, each source's samples and gaps, the warnings
    // given at its start (the charts are figures, drawn with the others).
    const where = document.getElementById("monitors");
    if (!where || !monitors) { return; }
    const parts = [];
    if (monitors.diagnosis.length) {
      parts.push(element("div", {class: "warning", id: "diagnosis"}, [element("b", {}, ["Diagnosis of the target's side"]),
        element("ul", {}, monitors.diagnosis.map(function (finding) {
          return element("li", {"data-rule": finding.rule, "data-monitor": finding.monitor, "data-second": finding.second},
                         [finding.message]);
        }))]));
    } else {
      parts.push(element("p", {id: "diagnosis-none"}, ["No diagnosis rule fired" + (root.dataset.status === "running" ? " so far." : ".")]));
    }
    for (const warning of monitors.warnings) { parts.push(element("p", {class: "warning"}, [warning])); }
    parts.push(sectionTable("monitors", monitors.sources));
    document.getElementById("monitors").replaceChildren(...parts);
  }

  function render(state) {
    renderStatus(state);
    renderMonitors(state.monitors);
    renderHeadline(state.summary);
    renderSteps(state.steps);
    renderErrors(state.summary);
    renderSections(state);
    const warning = document.getElementById("saturation-warning");
    warning.hidden = !state.saturation;
    warning.replaceChildren(...(state.saturation ? [element("b", {}, ["Saturated generator. "]), state.saturation] : []));
    const littles = document.getElementById("littles-law-warning");
    littles.hidden = !state.littles_law;
    littles.replaceChildren(...(state.littles_law ? [element("b", {}, ["Figures inconsistent by Little's law. "]), state.littles_law] : []));
  }

  function readJson(response) {
    return response.json().then(function (body) {
      if (!response.ok && response.status !== 202) { throw new Error(body.error || ("HTTP " + response.status)); }
      return body;
    });
  }

  function monitorCharts(ids) {
    // A monitor's own charts beyond its first (a PostgreSQL monitor's statement mix, tables,
    // standbys, rows) get their place as their figures first come, after the chart before them.
    const holder = document.getElementById("monitor-charts");
    if (!holder) { return; }
    let previous = null;
    for (const id of ids) {
      if (!id.startsWith("chart-monitor-")) { continue; }
      let chart = document.getElementById(id);
      if (!chart) {
        chart = element("div", {class: "chart", id: id}, []);
        if (previous) { previous.after(chart); } else { holder.append(chart); }
      }
      previous = chart;
    }
  }

  function load() {
    fetch(api, {headers: {accept: "application/json"}}).then(readJson).then(function (state) {
      render(state);
      monitorCharts(Object.keys(state.figures || {}));
      HordeCharts.drawAll(state.figures);
      problem(null);
    }).catch(function (error) { problem("cannot read the run: " + error.message); });
  }

  function follow() {
    source = new EventSource(api + "/events");
    source.addEventListener("update", function (event) {
      const state = JSON.parse(event.data);
      render(state);
      monitorCharts(Object.keys(state.changes || {}));
      HordeCharts.apply(state.changes);
      problem(null);
    });
    source.addEventListener("end", function () {
      source.close();
      source = null;
      load();
    });
    source.onerror = function () {
      // EventSource comes back by itself; the stream then starts over with a whole state.
      if (source) { problem("lost the live stream; reconnecting..."); }
    };
  }

  function ask(request) {
    const answer = document.getElementById("control-answer");
    answer.className = "";
    answer.textContent = "asking the run...";
    fetch(api + "/control", {method: "POST", headers: {"content-type": "application/json", accept: "application/json"},
                             body: JSON.stringify(request)})
      .then(readJson)
      .then(function (body) {
        answer.textContent = body.answer || body.message;
        answer.className = body.applied === true ? "applied" : body.applied === false ? "refused" : "";
      })
      .catch(function (error) { answer.textContent = error.message; answer.className = "refused"; });
  }

  document.getElementById("stop").addEventListener("click", function () { ask({stop: true}); });
  const apply = document.getElementById("apply");
  if (apply) {
    apply.addEventListener("click", function () {
      const vus = document.getElementById("vus");
      const rate = document.getElementById("rate");
      const request = {ramp_s: Number(document.getElementById("ramp").value || 0)};
      if (vus && vus.value !== "") { request.vus = Number(vus.value); }
      else if (rate && rate.value !== "") { request.rate_per_s = Number(rate.value); }
      else { ask({}); return; } // the answer explains what is missing
      const scenario = document.getElementById("scenario");
      if (scenario && scenario.value) { request.scenarios = [scenario.value]; }
      ask(request);
    });
  }

  if (root.dataset.status === "running") { follow(); } else { load(); }
})();
