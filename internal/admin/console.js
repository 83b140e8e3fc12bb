// The principal's console: the one script of party's admin pages, served
// from the same origin (the Content-Security-Policy admits nothing else).
// It does two things, and the pages work without it:
//
// 1. Every <time datetime> is shown in the reader's own time zone, with
//    the zone named; the server writes UTC, kept as the element's title.
// 2. An open approvals page asks GET /api/console every few seconds
//    whether anything changed. Only then does it fetch the page again, and
//    it changes only the parts that changed: the budgets and the decided
//    list are replaced, a new request is added in its place, a request
//    decided elsewhere is removed. A request still pending is never
//    touched, so a condition or reason being typed, an open confirmation
//    and the focus all stay as they are.
'use strict';
(function () {
  var zoned = new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'short', day: 'numeric',
    hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23',
    timeZoneName: 'short'
  });

  function localTimes(root) {
    root.querySelectorAll('time[datetime]').forEach(function (t) {
      if (t.dataset.local) return;
      var d = new Date(t.getAttribute('datetime'));
      if (isNaN(d.getTime())) return;
      t.title = t.textContent;
      t.textContent = zoned.format(d);
      t.dataset.local = 'yes';
    });
  }
  localTimes(document);

  var live = document.querySelector('main[data-live]');
  if (!live) return;
  var status = document.getElementById('live');
  var version = live.dataset.version;
  var every = (parseInt(live.dataset.every, 10) || 3) * 1000;
  var busy = false, stopped = false;

  function say(text, bad) {
    if (!status) return;
    status.textContent = text;
    status.className = bad ? 'live err' : 'live';
  }

  function replace(doc, id) {
    var now = document.getElementById(id), next = doc.getElementById(id);
    if (now && next) now.replaceWith(document.importNode(next, true));
  }

  // mergePending brings the pending list to the fetched one without
  // moving or rewriting a request already shown.
  function mergePending(doc) {
    var list = document.getElementById('pending'), next = doc.getElementById('pending');
    if (!list || !next) return;
    var wanted = {};
    Array.prototype.forEach.call(next.children, function (c) { if (c.id) wanted[c.id] = true; });
    Array.prototype.slice.call(list.children).forEach(function (c) {
      if (!c.id || !wanted[c.id]) c.remove();
    });
    var anchor = null;
    Array.prototype.forEach.call(next.children, function (c) {
      if (!c.id) return;
      var shown = document.getElementById(c.id);
      if (!shown || shown.parentNode !== list) {
        shown = document.importNode(c, true);
        if (anchor) anchor.after(shown); else list.prepend(shown);
      }
      anchor = shown;
    });
  }

  function merge(doc) {
    ['budgets', 'pending-head', 'decided-head', 'decided'].forEach(function (id) { replace(doc, id); });
    mergePending(doc);
    localTimes(document);
    var m = doc.querySelector('main[data-live]');
    if (m) version = m.dataset.version;
  }

  function fail(r) {
    if (r.status === 401 || r.status === 403 || r.redirected) {
      stopped = true;
      throw new Error('signed out; reload the page to sign in again');
    }
    throw new Error('the instance answered ' + r.status);
  }

  function check() {
    if (busy || stopped || document.hidden) return;
    busy = true;
    fetch(live.dataset.live, {credentials: 'same-origin', cache: 'no-store'})
      .then(function (r) { if (!r.ok) fail(r); return r.json(); })
      .then(function (v) {
        if (v.version === version) return null;
        return fetch('/', {credentials: 'same-origin', cache: 'no-store'}).then(function (r) {
          if (!r.ok || r.redirected) fail(r);
          return r.text();
        });
      })
      .then(function (html) {
        if (html !== null) merge(new DOMParser().parseFromString(html, 'text/html'));
        say('Up to date at ' + new Date().toLocaleTimeString() + '; new requests show by themselves, and what you type is kept.');
      })
      .catch(function (e) { say('Not updating: ' + e.message + '.', true); })
      .then(function () { busy = false; });
  }

  say('New requests show by themselves; what you type is kept.');
  setInterval(check, every);
  document.addEventListener('visibilitychange', check);
})();
