"use strict";
(function () {
  // Point at a device in the legend: its ops stay, the others dim.
  var items = document.querySelectorAll(".legend li");
  var marks = document.querySelectorAll(".op[data-device], .op-bar, .copy-bar, svg.memory");
  function pick(device) {
    marks.forEach(function (el) {
      el.classList.toggle("dim", device !== null && el.getAttribute("data-device") !== device);
    });
    items.forEach(function (li) {
      li.classList.toggle("on", li.getAttribute("data-device") === device);
    });
  }
  items.forEach(function (li) {
    li.addEventListener("mouseenter", function () { pick(li.getAttribute("data-device")); });
    li.addEventListener("mouseleave", function () { pick(null); });
  });
  // Click a column of the op table to sort by it (again: the other way).
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, col) {
      var up = true;
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col].textContent, y = b.cells[col].textContent;
          return (up ? 1 : -1) * x.localeCompare(y, undefined, {numeric: true});
        });
        up = !up;
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  // What the page shows, for a reader or a test: the devices of the legend, once scripts ran.
  document.body.setAttribute("data-devices", Array.prototype.map.call(items, function (li) {
    return li.getAttribute("data-device");
  }).join(","));
  document.body.setAttribute("data-ready", "yes");
})();
