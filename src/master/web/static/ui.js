// herd web UI: follows a task's log tail (the only script; pages are
// rendered by the master).
'use strict';
(function () {
  const log = document.getElementById('log');
  if (!log) return;
  const status = document.getElementById('log-status');
  let busy = false;
  async function poll() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const r = await fetch(log.dataset.src, { credentials: 'same-origin', cache: 'no-store' });
      const text = await r.text();
      if (!r.ok) {
        status.textContent = 'log: ' + r.status + ' ' + text;
      } else {
        const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        if (log.textContent !== text) {
          log.textContent = text;
          if (atBottom) log.scrollTop = log.scrollHeight;
        }
        const state = r.headers.get('X-Herd-Log') || 'following';
        status.textContent = state + ', updated ' + new Date().toLocaleTimeString();
      }
    } catch (e) {
      status.textContent = 'log: ' + e;
    }
    busy = false;
  }
  poll();
  setInterval(poll, 2000);
})();
