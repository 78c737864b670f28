/* The HTML report's one script (inlined by templates/page.html.j2): sortable tables and a CSV download of a
   table's rows as shown. Clicking a header of a `table.sortable` sorts its body rows by that column (again: the
   other way); a column whose filled cells all start with a number sorts numerically (the first number: the mean
   of "85.00 ± 1.41 (2)"), others as text; empty and "—" cells stay last either way. A `button.csv` (`data-table`:
   the table's id) saves that table's header and visible body rows, in their current order, as `<table id>.csv`
   (RFC 4180 quoting, UTF-8 with a byte-order mark), built in the page as a Blob: nothing is loaded or sent
   anywhere. Badges (`.badge`) are left out of sort keys and CSV cells. Without JavaScript the tables read as
   before. */
(function () {
  "use strict";
  var MISSING = "\u2014";
  var NUMBER = /^[\[(<>~\u2248]*\s*[-+\u2212]?\d/;

  function cellText(cell) {
    var copy = cell.cloneNode(true);
    Array.prototype.forEach.call(copy.querySelectorAll(".badge"), function (b) { b.remove(); });
    return copy.textContent.replace(/\s+/g, " ").trim();
  }

  function isEmpty(text) { return text === "" || text === MISSING; }

  function number(text) {
    var found = text.replace(/\u2212/g, "-").replace(/,(?=\d{3})/g, "").match(/[-+]?\d*\.?\d+(?:e[-+]?\d+)?/i);
    return found ? parseFloat(found[0]) : NaN;
  }

  function sortBy(table, index, header) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keys = rows.map(function (row) { return row.cells[index] ? cellText(row.cells[index]) : ""; });
    var numeric = keys.every(function (k) { return isEmpty(k) || NUMBER.test(k); });
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var order = rows.map(function (row, i) { return i; });
    order.sort(function (a, b) {
      var x = keys[a], y = keys[b];
      if (isEmpty(x) || isEmpty(y)) { return (isEmpty(x) - isEmpty(y)) || (a - b); }
      var c = numeric ? number(x) - number(y) : x.localeCompare(y, undefined, {numeric: true});
      return (ascending ? c : -c) || (a - b);
    });
    order.forEach(function (i) { body.appendChild(rows[i]); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }

  function quote(text) {
    return /[",\r\n]/.test(text) ? "\"" + text.replace(/"/g, "\"\"") + "\"" : text;
  }

  function csv(table) {
    var lines = [Array.prototype.map.call(table.tHead.rows[0].cells, cellText)];
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      if (row.hidden || row.style.display === "none") { return; }
      lines.push(Array.prototype.map.call(row.cells, cellText));
    });
    return lines.map(function (cells) { return cells.map(quote).join(","); }).join("\r\n") + "\r\n";
  }

  function download(table) {
    var blob = new Blob(["\ufeff" + csv(table)], {type: "text/csv;charset=utf-8"});
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = table.id + ".csv";
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(link.href); }, 0);
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      th.tabIndex = 0;
      th.title = "sort by this column (click again: the other way)";
      th.addEventListener("click", function () { sortBy(table, index, th); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, index, th); }
      });
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll("button.csv"), function (button) {
    var table = document.getElementById(button.getAttribute("data-table"));
    if (table) { button.addEventListener("click", function () { download(table); }); }
  });
})();
