// page.js: the operator's page's own code. Polls /stats (every 2 s) and
// /stats/history (every 5 s, the ring's interval), and draws the health
// line, the topic table, the charts (SVG) and the connections. Read-only:
// it only ever GETs. The health words follow http_page.c's health().
'use strict';
(function () {
  var STATS_MS = 2000, HISTORY_MS = 5000;
  var COLORS = ['#1a5fb4', '#c64600', '#26a269', '#9141ac', '#a51d2d', '#986a44', '#e5a50a', '#2190a4'];
  var $ = function (id) { return document.getElementById(id); };
  var prev = null;          // {at, rec: {topic: received}} of the last /stats, for received/s
  var rates = {};           // topic -> received/s between the last two polls
  var lastDoc = null;
  var sortKey = 'trouble', sortAsc = false;

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  function num(v) { return typeof v === 'number' ? v : 0; }
  function sum(o) { var n = 0; for (var k in o || {}) n += num(o[k]); return n; }
  function fmt(v) {
    v = num(v);
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + 'G';
    if (a >= 1e6) return (v / 1e6).toFixed(1) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    return Number.isInteger(v) ? String(v) : v.toFixed(1);
  }
  function bytes(v) {
    v = num(v);
    if (v >= 1 << 30) return (v / (1 << 30)).toFixed(1) + ' GiB';
    if (v >= 1 << 20) return (v / (1 << 20)).toFixed(1) + ' MiB';
    if (v >= 1 << 10) return (v / (1 << 10)).toFixed(1) + ' KiB';
    return v + ' B';
  }
  function dur(s) {
    s = num(s);
    if (s > 0 && s < 10) return s.toFixed(1) + ' s';
    s = Math.floor(s);
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.floor(s / 60) + ' min';
    if (s < 172800) return Math.floor(s / 3600) + ' h ' + Math.floor(s % 3600 / 60) + ' min';
    return Math.floor(s / 86400) + ' d ' + Math.floor(s % 86400 / 3600) + ' h';
  }
  function reasonText(o) {
    var parts = [];
    for (var k in o || {}) if (num(o[k])) parts.push(k + ' ' + o[k]);
    return parts.length ? parts.join(', ') : 'none';
  }

  function trouble(t) {
    return t.state === 'stalled' || t.state === 'failed' || t.blocked === true || t.invariant_ok === false;
  }
  function dropped(t) { return num(t.dropped) + num(t.dropped_age); }

  // "healthy" / "degraded" / "not ready" and why: as http_page.c's health()
  function health(doc) {
    if (!doc.ready) return { level: 'not ready', why: [doc.not_ready_reason || 'not ready'] };
    var why = [], level = 'healthy';
    if (!doc.healthy) { why.push(doc.unhealthy_reason || 'unhealthy'); level = 'degraded'; }
    var cs = (doc.cluster && doc.cluster.state) || 'unknown';
    if (cs !== 'connected') { why.push('cluster ' + cs + ': messages wait in the log'); level = 'degraded'; }
    if (doc.invariant_ok === false) { why.push('accounting invariant broken'); level = 'degraded'; }
    var bad = (doc.topics || []).filter(trouble).length;
    if (bad) { why.push(bad + ' topic' + (bad === 1 ? '' : 's') + ' in trouble'); level = 'degraded'; }
    if (!why.length) why.push('ready, cluster connected, every topic flowing');
    return { level: level, why: why };
  }

  function showHealth(level, why) {
    var h = $('health');
    h.setAttribute('data-level', level);
    h.className = 'health';
    h.textContent = '';
    h.appendChild(el('b', {}, level));
    h.appendChild(document.createTextNode(': ' + why));
  }

  function renderStats(doc) {
    var now = Date.now() / 1000, rec = {};
    (doc.topics || []).forEach(function (t) {
      rec[t.topic] = t.received;
      if (prev && prev.rec[t.topic] !== undefined && now > prev.at)
        rates[t.topic] = Math.max(0, (t.received - prev.rec[t.topic]) / (now - prev.at));
    });
    prev = { at: now, rec: rec };
    lastDoc = doc;
    var h = health(doc);
    showHealth(h.level, h.why.join('; '));
    $('edge').textContent = doc.edge || '';
    document.title = 'Tributary ' + (doc.edge || '') + ': ' + h.level;
    $('cluster').textContent = (doc.cluster && doc.cluster.state) || 'unknown';
    $('uptime').textContent = dur(doc.uptime_seconds);
    $('version').textContent = doc.version || '?';
    $('updated').textContent = new Date().toLocaleTimeString();
    renderTopics(doc.topics || []);
    renderConnections(doc.connections || {});
    renderListeners(doc.listeners || []);
  }

  function row(t) {
    return {
      // the server's rate over its last 5 s sample; before it has one, ours between two polls
      topic: t.topic, state: t.state + (t.blocked ? ', blocked' : ''),
      rate: typeof t.received_per_second === 'number' ? t.received_per_second : rates[t.topic],
      received: num(t.received), queued: num(t.queued), lag_messages: num(t.lag_messages),
      lag_bytes: num(t.lag_bytes), age: num(t.oldest_unreplicated_age_seconds), dropped: dropped(t),
      rejected: sum(t.rejected), durability: t.durability || 'log',
      trouble: trouble(t) ? 2 : (dropped(t) || sum(t.rejected)) ? 1 : 0, t: t
    };
  }

  function renderTopics(topics) {
    var rows = topics.map(row);
    rows.sort(function (a, b) {
      var x = a[sortKey], y = b[sortKey];
      if (x === undefined) x = -1;
      if (y === undefined) y = -1;
      var c = typeof x === 'string' ? x.localeCompare(y) : x - y;
      if (c === 0 && sortKey === 'trouble') c = b.topic.localeCompare(a.topic);
      return sortAsc ? c : -c;
    });
    var body = document.querySelector('#topics tbody');
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) {
      var tr = el('tr', { 'data-topic': r.topic, 'class': r.trouble === 2 ? 'bad' : r.trouble ? 'warn' : '' });
      var t = r.t;
      var cells = [
        ['topic', r.topic], ['state', r.state], ['rate n', r.rate === undefined ? '…' : fmt(r.rate)],
        ['received', r.received], ['queued', r.queued], ['lag_messages n', r.lag_messages],
        ['lag_bytes n', bytes(r.lag_bytes)], ['age n', dur(r.age)], ['dropped', r.dropped],
        ['rejected', r.rejected], ['durability', r.durability]
      ];
      cells.forEach(function (c) {
        var td = el('td', { 'class': c[0] }, String(c[1]));
        tr.appendChild(td);
      });
      tr.children[8].title = 'disk bound ' + num(t.dropped) + ', max_age ' + num(t.dropped_age) +
        ', in flight ' + num(t.dropped_in_flight) + '; over the log\'s life: bound ' + num(t.wal_dropped_total) +
        ', max_age ' + num(t.wal_dropped_age_total) + ', lost ' + num(t.wal_lost_total);
      tr.children[9].title = reasonText(t.rejected);
      if (t.stalled) tr.children[1].title = 'no progress for ' + dur(t.no_progress_seconds);
      frag.appendChild(tr);
    });
    body.textContent = '';
    body.appendChild(frag);
    document.querySelectorAll('#topics th').forEach(function (th) {
      var on = th.getAttribute('data-key') === sortKey;
      th.classList.toggle('sorted', on);
      th.classList.toggle('asc', on && sortAsc);
    });
  }

  function list(id, o) {
    var ul = $(id);
    ul.textContent = '';
    var any = false;
    for (var k in o || {}) {
      if (!num(o[k])) continue;
      ul.appendChild(el('li', {}, k + ': ' + o[k]));
      any = true;
    }
    if (!any) ul.appendChild(el('li', { 'class': 'none' }, 'none'));
  }

  function renderConnections(c) {
    $('conn-mqtt').textContent = num(c.mqtt);
    $('conn-http').textContent = num(c.http);
    $('conn-accepted').textContent = num(c.mqtt_accepted);
    list('conn-refused', c.mqtt_refused);
    list('conn-closed', c.mqtt_closed);
    var ol = $('talkers');
    ol.textContent = '';
    var talkers = c.top_talkers || [];
    talkers.forEach(function (t) {
      ol.appendChild(el('li', { 'data-client': t.client_id }, t.client_id + ': ' + fmt(t.messages_per_second) + ' msg/s'));
    });
    if (!talkers.length)
      ol.appendChild(el('li', { 'class': 'none' }, !c.top_talkers ? 'not reported'
        : c.top_talkers_window_seconds ? 'nobody published' : 'measuring (5 s)'));
    if (c.top_talkers_window_seconds)
      ol.title = 'PUBLISHes per second over the last ' + c.top_talkers_window_seconds.toFixed(1) + ' s';
  }

  // Each MQTT listener: its address, TLS or not, its connections, and the
  // PUBLISHes its clients were denied by the ACL (the security counter).
  function renderListeners(ls) {
    var ul = $('listeners');
    ul.textContent = '';
    ls.forEach(function (l) {
      var denied = num(l.publish_denied);
      ul.appendChild(el('li', { 'data-listener': l.listener, 'data-connections': String(num(l.connections)),
        'data-denied': String(denied), 'class': denied ? 'warn' : '' },
        l.listener + (l.tls ? ' (TLS)' : '') + ': ' + num(l.connections) + ' conns' +
        (denied ? ', ' + denied + ' publishes denied' : '')));
    });
    if (!ls.length) ul.appendChild(el('li', { 'class': 'none' }, 'none'));
  }

  // ---- charts -------------------------------------------------------------

  var CHARTS = [
    { id: 'ingest', title: 'Ingest (messages/s)', key: 'received_per_second', fmt: fmt },
    { id: 'replication', title: 'Replication (messages/s)', key: 'replicated_per_second', fmt: fmt },
    { id: 'queued', title: 'Queued (messages)', key: 'queued', fmt: fmt },
    { id: 'lagage', title: 'Lag age, oldest unreplicated (s)', key: 'lag_age_seconds', fmt: dur },
    { id: 'disk', title: 'Disk writes (bytes/s, the wear figure)', key: 'disk_write_bytes_per_second',
      fmt: bytes, total_only: true }
  ];

  function chart(c, h) {
    var W = 600, H = 150, L = 44, B = 16;
    var box = el('div', { 'class': 'chart', id: 'chart-' + c.id });
    var total = (h.total && h.total[c.key]) || [];
    var head = el('h3', {}, c.title);
    head.appendChild(el('span', { 'class': 'now' }, total.length ? c.fmt(total[total.length - 1]) : '–'));
    box.appendChild(head);
    var series = [{ name: 'all topics', v: total, cls: 'total', color: '#1d2330' }];
    if (!c.total_only)
      (h.topics || []).forEach(function (t, i) {
        series.push({ name: t.topic, v: t[c.key] || [], cls: 'topic', color: COLORS[i % COLORS.length] });
      });
    var max = 0;
    series.forEach(function (s) { s.v.forEach(function (v) { if (v > max) max = v; }); });
    if (max <= 0) max = 1;
    var n = (h.t || []).length, t0 = n ? h.t[0] : 0, t1 = n ? h.t[n - 1] : 1;
    var span = Math.max(t1 - t0, num(h.interval_seconds) || 5);
    var s = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', 'data-points': String(total.length),
                         role: 'img', 'aria-label': c.title });
    [0, 0.5, 1].forEach(function (f) {
      var y = (H - B) - f * (H - B - 6);
      s.appendChild(svg('line', { 'class': 'grid', x1: L, x2: W, y1: y, y2: y }));
      var tx = svg('text', { x: 2, y: y + 3 });
      tx.textContent = c.fmt(max * f);
      s.appendChild(tx);
    });
    var tl = svg('text', { x: L, y: H - 3 });
    tl.textContent = n ? new Date(t0 * 1000).toLocaleTimeString() : 'no samples yet';
    s.appendChild(tl);
    var tr = svg('text', { x: W - 60, y: H - 3 });
    tr.textContent = n ? new Date(t1 * 1000).toLocaleTimeString() : '';
    s.appendChild(tr);
    series.slice().reverse().forEach(function (se) {
      var pts = [];
      for (var i = 0; i < se.v.length && i < n; i++) {
        var x = L + (W - L - 4) * (n === 1 ? 1 : (h.t[i] - t0) / span);
        var y = (H - B) - (se.v[i] / max) * (H - B - 6);
        pts.push(x.toFixed(1) + ',' + y.toFixed(1));
      }
      if (pts.length === 1) pts.push(pts[0]); // one sample: a dot-sized line
      var pl = svg('polyline', { 'class': se.cls, points: pts.join(' '), stroke: se.color, 'data-series': se.name });
      s.appendChild(pl);
    });
    box.appendChild(s);
    if (series.length > 1) {
      var lg = el('div', { 'class': 'legend' });
      series.forEach(function (se) {
        var i = el('i');
        i.style.background = se.color;
        lg.appendChild(i);
        lg.appendChild(document.createTextNode(se.name));
      });
      box.appendChild(lg);
    }
    return box;
  }

  function renderHistory(h) {
    var root = $('charts');
    var frag = document.createDocumentFragment();
    CHARTS.forEach(function (c) { frag.appendChild(chart(c, h)); });
    root.textContent = '';
    root.appendChild(frag);
    root.setAttribute('data-seq', String(h.seq));
    $('charts-hint').textContent = 'One sample every ' + h.interval_seconds + ' s, the last ' +
      dur(h.capacity * h.interval_seconds) + ' (' + (h.t || []).length + ' held); thick line: all topics, ' +
      'thin lines: the first ' + (h.topics || []).length + ' topics.';
  }

  // ---- polling ------------------------------------------------------------

  function get(path) {
    return fetch(path, { cache: 'no-store', credentials: 'same-origin' }).then(function (r) {
      if (!r.ok) throw new Error(path + ' answered ' + r.status);
      return r.json();
    });
  }

  function pollStats() {
    get('/stats').then(renderStats, function (e) {
      showHealth('unreachable', 'the gateway did not answer (' + e.message + '); figures below are from ' +
        $('updated').textContent);
    }).then(function () { setTimeout(pollStats, STATS_MS); });
  }

  function pollHistory() {
    get('/stats/history').then(renderHistory, function () { /* the health line says it */ })
      .then(function () { setTimeout(pollHistory, HISTORY_MS); });
  }

  document.querySelectorAll('#topics th').forEach(function (th) {
    th.addEventListener('click', function () {
      var k = th.getAttribute('data-key');
      if (k === sortKey) sortAsc = !sortAsc;
      else { sortKey = k; sortAsc = k === 'topic' || k === 'state' || k === 'durability'; }
      if (lastDoc) renderTopics(lastDoc.topics || []);
    });
  });
  pollStats();
  pollHistory();
})();
