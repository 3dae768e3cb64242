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

  // The graph: the server lays the run out and answers the part of it a rectangle shows
  // (/api/runs/RUN/graph), with the states of those tasks. The page asks for the scrolled view
  // with a margin, and again when the view leaves what it has, so a 100,000-task run costs
  // the page what is on screen. A node shows the latest state the stream said of its task.
  var SVGNS = "http://www.w3.org/2000/svg", PAD = 600;
  function svgEl(name, attrs, parent) {
    var el = document.createElementNS(SVGNS, name);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(el);
    return el;
  }
  function label(id) { var r = Array.from(id); return r.length <= 22 ? id : r.slice(0, 21).join("") + "\u2026"; }
  function newGraph(runID, stateOf) {
    var svg = document.getElementById("dag"), box = svg.parentNode, layer = document.getElementById("dag-nodes");
    var note = document.getElementById("graph-note"), paths = svg.querySelectorAll("path.edge");
    var base = "/runs/" + encodeURIComponent(runID) + "/tasks/", api = "/api/runs/" + encodeURIComponent(runID) + "/graph";
    // stale: a snapshot came while a request was out, so its answer may predate it.
    // Maps keyed by task id have no prototype: a task may be named "constructor".
    var drawn = Object.create(null), have = null, asking = false, queued = false, seq = 0, stale = false;
    function node(n) {
      var el = svgEl("g", { "class": "node st-" + stateOf(n.id, n.st), "data-task": n.id, tabindex: "0", role: "link" });
      svgEl("title", {}, el).textContent = n.id + " (" + n.sub + ")" + (n.locks ? " locks: " + n.locks : "");
      svgEl("rect", { x: n.x, y: n.y, width: nw, height: nh, rx: 6 }, el);
      svgEl("text", { x: n.x + 8, y: n.y + 16 }, el).textContent = label(n.id);
      svgEl("text", { "class": "sub", x: n.x + 8, y: n.y + 32 }, el).textContent = n.locks ? "lock " + n.locks : n.sub;
      return el;
    }
    var nw = 168, nh = 40;
    function edges(c) {
      var d = [];
      for (var k = 0; k + 3 < c.length; k += 4) {
        var mid = (c[k + 1] + c[k + 3]) / 2;
        d.push("M" + c[k] + " " + c[k + 1] + "C" + c[k] + " " + mid + " " + c[k + 2] + " " + mid + " " + c[k + 2] + " " + c[k + 3]);
      }
      return d.join("");
    }
    function view() {
      return { x0: box.scrollLeft, y0: box.scrollTop, x1: box.scrollLeft + box.clientWidth, y1: box.scrollTop + box.clientHeight };
    }
    function covered(v) { return have && v.x0 >= have.x0 && v.y0 >= have.y0 && v.x1 <= have.x1 && v.y1 <= have.y1; }
    function ask() {
      queued = false;
      var v = view();
      if (asking || covered(v)) return;
      var want = { x0: Math.max(0, v.x0 - PAD), y0: Math.max(0, v.y0 - PAD), x1: v.x1 + PAD, y1: v.y1 + PAD };
      var mine = ++seq;
      asking = true;
      stale = false;
      fetch(api + "?x0=" + Math.floor(want.x0) + "&y0=" + Math.floor(want.y0) + "&x1=" + Math.ceil(want.x1) + "&y1=" + Math.ceil(want.y1),
        { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (resp) {
          if (resp.status === 503) { throw new Error("later"); }
          if (!resp.ok) { throw new Error("status " + resp.status); }
          return resp.json();
        })
        .then(function (g) {
          asking = false;
          if (mine !== seq) return;
          nw = g.nw; nh = g.nh;
          svg.setAttribute("width", g.w); svg.setAttribute("height", g.h); svg.setAttribute("viewBox", "0 0 " + g.w + " " + g.h);
          svg.setAttribute("data-nodes", g.total);
          if (note) { note.remove(); note = null; }
          var add = document.createDocumentFragment(), keep = Object.create(null);
          g.nodes.forEach(function (n) {
            keep[n.id] = true;
            if (!drawn[n.id]) { drawn[n.id] = node(n); add.appendChild(drawn[n.id]); }
            else setState(drawn[n.id], stateOf(n.id, n.st));
          });
          Object.keys(drawn).forEach(function (id) { if (!keep[id]) { drawn[id].remove(); delete drawn[id]; } });
          layer.appendChild(add);
          paths[0].setAttribute("d", edges(g.deps));
          paths[1].setAttribute("d", edges(g.needs));
          have = stale ? null : want;
          later();
        })
        .catch(function (e) {
          asking = false;
          if (note) note.textContent = e.message === "later" ? "Laying out the graph..." : "The graph could not be read (" + e.message + "); reload the page.";
          setTimeout(later, 1000);
        });
    }
    function later() { if (!queued) { queued = true; requestAnimationFrame(ask); } }
    box.addEventListener("scroll", later, { passive: true });
    window.addEventListener("resize", later);
    function open(e) {
      var n = e.target.closest && e.target.closest("g.node");
      if (n && (e.type === "click" || e.key === "Enter")) window.location.href = base + encodeURIComponent(n.getAttribute("data-task"));
    }
    svg.addEventListener("click", open);
    svg.addEventListener("keydown", open);
    later();
    return {
      el: function (task) { return drawn[task] || null; },
      // refresh asks again for what is shown: after a snapshot, the drawn states may be old.
      refresh: function () { stale = true; have = null; later(); }
    };
  }

  // A task's state shows on its node (when drawn). Its row of the table (when listed) is
  // replaced whole by the row the server rendered for it (the stream's "rows"), the same
  // template a fresh load uses, so no cell of a live row (state, attempts, verify, reason)
  // is ever patched by the page.
  var graph = null, shown = Object.create(null);
  function taskChanged(task, state) {
    shown[task] = state;
    var n = graph && graph.el(task);
    if (n) setState(n, state);
  }
  function rowsChanged(html) {
    Object.keys(html).forEach(function (task) {
      var cur = document.querySelector('table#tasks tr[data-task="' + esc(task) + '"]');
      if (!cur) return;
      // The server's own escaped render of the "taskrow" template; parsed inert in a
      // template element, and put in place only when it is the row of that task.
      var t = document.createElement("template");
      t.innerHTML = html[task];
      var next = t.content.firstElementChild;
      if (next && next.tagName === "TR" && next.getAttribute("data-task") === task) cur.replaceWith(next);
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

  // listen opens an event stream and keeps it open. The browser reconnects by itself after a
  // stream drops, but gives up for good when an answer is not a stream (a 503 while the
  // server's reads are busy, a 429, a proxy's 502): the page would then show what it last
  // heard, forever, while the run moves on. So a stream the browser closed is opened again,
  // waiting longer each time (1 s, doubling, at most 30 s); its first event resets the wait.
  function listen(url, handlers) {
    var wait = 1000;
    function open() {
      var es = new EventSource(url);
      Object.keys(handlers).forEach(function (name) {
        es.addEventListener(name, function (e) { wait = 1000; handlers[name](e, es); });
      });
      es.addEventListener("error", function () {
        if (es.readyState !== EventSource.CLOSED || es.ended) return;
        setTimeout(open, wait);
        wait = Math.min(wait * 2, 30000);
      });
    }
    open();
  }

  var run = document.getElementById("run");
  if (run && document.getElementById("dag")) {
    graph = newGraph(run.getAttribute("data-run"), function (task, st) { return shown[task] || st; });
  }
  if (run && window.EventSource) {
    var id = run.getAttribute("data-run");
    // The stream's snapshots carry the states of the tasks the table lists.
    var listed = Array.from(document.querySelectorAll("tr[data-task]")).map(function (tr) { return tr.getAttribute("data-task"); });
    listen("/api/runs/" + encodeURIComponent(id) + "/events" + (listed.length ? "?tasks=" + listed.map(encodeURIComponent).join(",") : ""), {
      snapshot: function (e) {
        var s = JSON.parse(e.data);
        if (s.tasks) {
          // A first snapshot or one after a reconnect: what the page drew may predate it.
          Object.keys(s.tasks).forEach(function (t) { taskChanged(t, s.tasks[t]); });
          if (graph) graph.refresh();
        }
        if (s.rows) rowsChanged(s.rows);
        var rs = document.getElementById("run-state");
        if (rs) { rs.textContent = s.state; setState(rs, s.state); }
        countsText(s.counts || {}, s.total || 0);
        run.setAttribute("data-live", s.state);
      },
      tasks: function (e) {
        var changed = JSON.parse(e.data);
        Object.keys(changed).forEach(function (t) { taskChanged(t, changed[t]); });
      },
      rows: function (e) { rowsChanged(JSON.parse(e.data)); }
    });
  }

  var d = document.getElementById("dispatch");
  if (d && d.getAttribute("data-live") && window.EventSource) {
    listen("/api/dispatches/" + encodeURIComponent(d.getAttribute("data-dispatch")) + "/tail", {
      tail: function (e) {
        var t = JSON.parse(e.data);
        var st = document.getElementById("d-state");
        if (st) { st.textContent = t.state; setState(st, t.state); }
        var ph = document.getElementById("d-phase");
        if (ph) ph.textContent = t.phase || "-";
        ["stdout", "stderr"].forEach(function (k) {
          var pre = document.getElementById(k);
          if (pre && pre.textContent !== t[k]) { pre.textContent = t[k]; pre.scrollTop = pre.scrollHeight; }
        });
      },
      end: function (e, ds) { ds.ended = true; ds.close(); window.location.reload(); }
    });
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
