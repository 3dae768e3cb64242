// agora run view: live updates over server-sent events. No third-party code; nothing is
// fetched from anywhere but this origin.
"use strict";
(function () {
  function setState(el, state) {
    if (!el) return;
    // classList, not className: an SVG element's className is not a string.
    Array.from(el.classList).forEach(function (c) { if (c.indexOf("st-") === 0) el.classList.remove(c); });
    el.classList.add("st-" + state);
  }
  function esc(s) { return window.CSS && CSS.escape ? CSS.escape(s) : s.replace(/["\\]/g, "\\$&"); }

  // One pass over the page indexes every node and row by task, so a snapshot of a
  // 1,000-task run updates in one sweep instead of 1,000 document queries.
  var byTask = null, shown = {};
  function index() {
    byTask = {};
    document.querySelectorAll("g.node[data-task], tr[data-task] span.state").forEach(function (el) {
      var holder = el.hasAttribute("data-task") ? el : el.closest("tr");
      var t = holder.getAttribute("data-task");
      (byTask[t] = byTask[t] || []).push(el);
    });
  }
  function taskChanged(task, state) {
    if (shown[task] === state) return;
    shown[task] = state;
    if (!byTask) index();
    (byTask[task] || []).forEach(function (el) {
      if (el.tagName === "SPAN") el.textContent = state;
      setState(el, state);
    });
  }

  function countsText(counts, total) {
    var el = document.getElementById("run-counts");
    if (!el) return;
    el.textContent = String(total) + " ";
    Object.keys(counts).sort().forEach(function (k) {
      var s = document.createElement("span");
      s.className = "count st-" + k;
      s.textContent = k + " " + counts[k];
      el.appendChild(s);
      el.appendChild(document.createTextNode(" "));
    });
  }

  var run = document.getElementById("run");
  if (run) {
    document.querySelectorAll("g.node[data-task]").forEach(function (g) {
      var m = /\bst-([a-z_]+)/.exec(g.getAttribute("class"));
      if (m) shown[g.getAttribute("data-task")] = m[1];
    });
  }
  if (run && window.EventSource) {
    var id = run.getAttribute("data-run");
    var es = new EventSource("/api/runs/" + encodeURIComponent(id) + "/events");
    var states = {};
    es.addEventListener("snapshot", function (e) {
      var s = JSON.parse(e.data);
      states = s.tasks || {};
      Object.keys(states).forEach(function (t) { taskChanged(t, states[t]); });
      var rs = document.getElementById("run-state");
      if (rs) { rs.textContent = s.state; setState(rs, s.state); }
      countsText(s.counts || {}, Object.keys(states).length);
      run.setAttribute("data-live", s.state);
    });
    es.addEventListener("tasks", function (e) {
      var changed = JSON.parse(e.data);
      Object.keys(changed).forEach(function (t) { states[t] = changed[t]; taskChanged(t, changed[t]); });
      var counts = {};
      Object.keys(states).forEach(function (t) { counts[states[t]] = (counts[states[t]] || 0) + 1; });
      countsText(counts, Object.keys(states).length);
    });
  }

  var d = document.getElementById("dispatch");
  if (d && d.getAttribute("data-live") && window.EventSource) {
    var ds = new EventSource("/api/dispatches/" + encodeURIComponent(d.getAttribute("data-dispatch")) + "/tail");
    ds.addEventListener("tail", function (e) {
      var t = JSON.parse(e.data);
      var st = document.getElementById("d-state");
      if (st) { st.textContent = t.state; setState(st, t.state); }
      var ph = document.getElementById("d-phase");
      if (ph) ph.textContent = t.phase || "-";
      ["stdout", "stderr"].forEach(function (k) {
        var pre = document.getElementById(k);
        if (pre && pre.textContent !== t[k]) { pre.textContent = t[k]; pre.scrollTop = pre.scrollHeight; }
      });
    });
    ds.addEventListener("end", function () { ds.close(); window.location.reload(); });
  }

  // Elapsed time of a live dispatch, ticking every second.
  var since = document.querySelectorAll("[data-since]");
  if (since.length) {
    setInterval(function () {
      since.forEach(function (el) {
        var s = Math.max(0, Math.floor((Date.now() - Date.parse(el.getAttribute("data-since"))) / 1000));
        var h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, sec = s % 60;
        el.textContent = (h ? h + "h" : "") + (h || m ? m + "m" : "") + sec + "s";
      });
    }, 1000);
  }
})();
