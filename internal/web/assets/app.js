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

  // The graph: the layout comes as JSON (#dag-data) and only the nodes and edges inside the
  // scrolled view, with a margin, are in the DOM, so a 1,000-task run costs tens of elements.
  // Nodes come and go as the view scrolls; each is drawn with the task's latest state.
  var SVGNS = "http://www.w3.org/2000/svg", PAD = 240;
  function svgEl(name, attrs, parent) {
    var el = document.createElementNS(SVGNS, name);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(el);
    return el;
  }
  function label(id) { var r = Array.from(id); return r.length <= 22 ? id : r.slice(0, 21).join("") + "\u2026"; }
  function newGraph(runID, g, stateOf) {
    var svg = document.getElementById("dag"), box = svg.parentNode, layer = document.getElementById("dag-nodes");
    var paths = svg.querySelectorAll("path.edge");
    var base = "/runs/" + encodeURIComponent(runID) + "/tasks/";
    var at = {}, drawn = {}, queued = false;
    g.id.forEach(function (id, i) { at[id] = i; });
    function node(i) {
      var x = g.x[i], y = g.y[i], el = svgEl("g", { "class": "node st-" + stateOf(g.id[i], g.st[i]), "data-task": g.id[i], tabindex: "0", role: "link" });
      svgEl("title", {}, el).textContent = g.id[i] + " (" + g.sub[i] + ")" + (g.locks[i] ? " locks: " + g.locks[i] : "");
      svgEl("rect", { x: x, y: y, width: g.nw, height: g.nh, rx: 6 }, el);
      svgEl("text", { x: x + 8, y: y + 16 }, el).textContent = label(g.id[i]);
      svgEl("text", { "class": "sub", x: x + 8, y: y + 32 }, el).textContent = g.locks[i] ? "lock " + g.locks[i] : g.sub[i];
      return el;
    }
    function edges(pairs, v) {
      var d = [];
      for (var k = 0; k + 1 < pairs.length; k += 2) {
        var a = pairs[k], b = pairs[k + 1];
        var x1 = g.x[a] + g.nw / 2, y1 = g.y[a] + g.nh, x2 = g.x[b] + g.nw / 2, y2 = g.y[b], mid = (y1 + y2) / 2;
        if (Math.max(x1, x2) < v.x0 || Math.min(x1, x2) > v.x1 || Math.max(y1, y2) < v.y0 || Math.min(y1, y2) > v.y1) continue;
        d.push("M" + x1 + " " + y1 + "C" + x1 + " " + mid + " " + x2 + " " + mid + " " + x2 + " " + y2);
      }
      return d.join("");
    }
    function draw() {
      queued = false;
      var v = { x0: box.scrollLeft - PAD, y0: box.scrollTop - PAD, x1: box.scrollLeft + box.clientWidth + PAD, y1: box.scrollTop + box.clientHeight + PAD };
      var add = document.createDocumentFragment();
      for (var i = 0; i < g.id.length; i++) {
        var seen = g.x[i] + g.nw >= v.x0 && g.x[i] <= v.x1 && g.y[i] + g.nh >= v.y0 && g.y[i] <= v.y1;
        if (seen && !drawn[i]) { drawn[i] = node(i); add.appendChild(drawn[i]); }
        if (!seen && drawn[i]) { drawn[i].remove(); delete drawn[i]; }
      }
      layer.appendChild(add);
      paths[0].setAttribute("d", edges(g.deps, v));
      paths[1].setAttribute("d", edges(g.needs, v));
    }
    function later() { if (!queued) { queued = true; requestAnimationFrame(draw); } }
    box.addEventListener("scroll", later, { passive: true });
    window.addEventListener("resize", later);
    function open(e) {
      var n = e.target.closest && e.target.closest("g.node");
      if (n && (e.type === "click" || e.key === "Enter")) window.location.href = base + encodeURIComponent(n.getAttribute("data-task"));
    }
    svg.addEventListener("click", open);
    svg.addEventListener("keydown", open);
    draw();
    return { el: function (task) { var i = at[task]; return i === undefined ? null : drawn[i] || null; } };
  }

  // A task's state shows on its node (when drawn) and its row of the table (when listed).
  var graph = null, rows = null, shown = {};
  function taskChanged(task, state) {
    if (shown[task] === state) return;
    shown[task] = state;
    if (!rows) {
      rows = {};
      document.querySelectorAll("tr[data-task] span.state").forEach(function (el) { rows[el.closest("tr").getAttribute("data-task")] = el; });
    }
    var row = rows[task];
    if (row) { row.textContent = state; setState(row, state); }
    var n = graph && graph.el(task);
    if (n) setState(n, state);
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

  var run = document.getElementById("run"), data = document.getElementById("dag-data");
  if (run && data) {
    graph = newGraph(run.getAttribute("data-run"), JSON.parse(data.textContent), function (task, st) { return shown[task] || st; });
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
