// minibroker console: the live parts. Without JavaScript every page still shows its data.
(function () {
  "use strict";
  var PERIOD_MS = 1000;

  // Re-fetch the page's live block every second (the server renders only that block when it
  // sees X-Console-Fragment).
  var live = document.getElementById("live");
  if (live && live.dataset.live) {
    var busy = false;
    setInterval(function () {
      if (busy || document.hidden) return;
      busy = true;
      fetch(live.dataset.live, {headers: {"X-Console-Fragment": "1"}})
        .then(function (r) { return r.text(); })
        .then(function (html) { live.innerHTML = html; })
        .catch(function () { /* the next tick tries again */ })
        .finally(function () { busy = false; });
    }, PERIOD_MS);
  }

  // Live tail of the messages page: records after the last one shown, appended as they come.
  var tail = document.getElementById("tail");
  var table = document.getElementById("records");
  if (tail && table) {
    var body = table.tBodies[0];
    var lastOffset = function () {
      var rows = body.rows, max = -1;
      for (var i = 0; i < rows.length; i++) max = Math.max(max, parseInt(rows[i].dataset.offset, 10));
      return max;
    };
    var cell = function (tr, text, pre) {
      var td = document.createElement("td");
      if (pre) { var p = document.createElement("pre"); p.textContent = text; td.appendChild(p); }
      else td.textContent = text;
      tr.appendChild(td);
    };
    var tailBusy = false;
    setInterval(function () {
      if (!tail.checked || tailBusy) return;
      tailBusy = true;
      var q = new URLSearchParams({partition: table.dataset.partition, after: lastOffset(),
                                   format: table.dataset.format, key: table.dataset.key});
      fetch(table.dataset.tail + "?" + q.toString())
        .then(function (r) { return r.json(); })
        .then(function (data) {
          (data.records || []).forEach(function (r) {
            if (r.offset <= lastOffset()) return;
            var tr = document.createElement("tr");
            tr.dataset.offset = r.offset;
            cell(tr, r.partition); cell(tr, r.offset); cell(tr, r.timestamp + " " + r.time);
            cell(tr, r.key, true); cell(tr, r.value, true);
            cell(tr, r.headers.map(function (h) { return h[0] + "=" + h[1]; }).join("\n"), true);
            body.appendChild(tr);
          });
          var none = document.getElementById("no-records");
          if (none && body.rows.length) none.remove();
        })
        .catch(function () {})
        .finally(function () { tailBusy = false; });
    }, PERIOD_MS);
  }
})();
