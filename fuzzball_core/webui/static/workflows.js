// Fuzzball Web UI: a workflow's log pane. Reads the workflow's output page by page from
// /workflows/ID/log (JSON), highlights a search inline, and scrolls to the end as output
// arrives only while Follow is checked. Loaded from this origin (the CSP allows no inline
// script); every text is put in the page as text, never as HTML.
"use strict";
(function () {
  function LogPane(pane) {
    this.pane = pane;
    this.url = pane.getAttribute("data-log-url");
    this.refreshMs = 1000 * Number(pane.getAttribute("data-refresh") || "2");
    this.output = document.getElementById("log");
    this.stage = document.getElementById("log-stage");
    this.search = document.getElementById("log-search");
    this.matches = document.getElementById("log-matches");
    this.follow = document.getElementById("log-follow");
    this.text = "";
    this.after = 0;
    this.generation = 0; // a change of stage abandons the reads of the one before
    this.current = -1; // the match the search last moved to
    var self = this;
    this.stage.addEventListener("change", function () { self.restart(); });
    this.search.addEventListener("input", function () { self.current = -1; self.render(); });
    this.search.addEventListener("keydown", function (event) {
      if (event.key === "Enter") {
        event.preventDefault();
        self.nextMatch(event.shiftKey ? -1 : 1);
      }
    });
    this.follow.addEventListener("change", function () {
      if (self.follow.checked) { self.scrollToEnd(); }
    });
    this.restart();
  }

  LogPane.prototype.restart = function () {
    this.generation += 1;
    this.after = 0;
    this.text = "";
    this.current = -1;
    this.render();
    this.read(this.generation);
  };

  LogPane.prototype.read = function (generation) {
    var self = this;
    var query = "?after=" + this.after;
    if (this.stage.value) { query += "&stage=" + encodeURIComponent(this.stage.value); }
    fetch(this.url + query, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        var type = response.headers.get("Content-Type") || "";
        if (response.redirected || type.indexOf("application/json") !== 0) {
          // the session ended: the whole page goes where the server sent this read
          window.location.assign(response.url);
          return null;
        }
        return response.json();
      })
      .then(function (page) {
        if (page === null || generation !== self.generation) { return; }
        self.take(page.chunks);
        if (!page.more) { return; }
        var wait = page.chunks.length ? 0 : self.refreshMs;
        window.setTimeout(function () { self.read(generation); }, wait);
      })
      .catch(function () {
        if (generation === self.generation) {
          window.setTimeout(function () { self.read(generation); }, self.refreshMs);
        }
      });
  };

  LogPane.prototype.take = function (chunks) {
    if (!chunks.length) { return; }
    var added = "";
    for (var i = 0; i < chunks.length; i++) {
      added += chunks[i].data;
      this.after = chunks[i].seq;
    }
    this.text += added;
    if (this.search.value) {
      this.render();
    } else {
      this.output.appendChild(document.createTextNode(added));
    }
    if (this.follow.checked) { this.scrollToEnd(); }
  };

  LogPane.prototype.scrollToEnd = function () {
    this.output.scrollTop = this.output.scrollHeight;
  };

  // the whole text again, each match of the search (any case) in a <mark>
  LogPane.prototype.render = function () {
    var output = this.output;
    while (output.firstChild) { output.removeChild(output.firstChild); }
    var term = this.search.value;
    if (!term) {
      output.appendChild(document.createTextNode(this.text));
      this.matches.textContent = "";
      return;
    }
    var haystack = this.text.toLowerCase();
    var needle = term.toLowerCase();
    var start = 0;
    var count = 0;
    var found;
    while ((found = haystack.indexOf(needle, start)) !== -1) {
      output.appendChild(document.createTextNode(this.text.slice(start, found)));
      var mark = document.createElement("mark");
      mark.textContent = this.text.slice(found, found + needle.length);
      output.appendChild(mark);
      start = found + needle.length;
      count += 1;
    }
    output.appendChild(document.createTextNode(this.text.slice(start)));
    this.matches.textContent = count === 1 ? "1 match" : count + " matches";
    var marks = output.querySelectorAll("mark");
    if (this.current >= marks.length) { this.current = -1; }
    if (this.current >= 0) {
      marks[this.current].classList.add("current");
    } else if (count) {
      this.nextMatch(1);
    }
  };

  // move to the next (or previous) match and show it, Follow or not: the reader asked
  LogPane.prototype.nextMatch = function (step) {
    var marks = this.output.querySelectorAll("mark");
    if (!marks.length) { return; }
    if (this.current >= 0 && this.current < marks.length) {
      marks[this.current].classList.remove("current");
    }
    this.current = (this.current + step + marks.length) % marks.length;
    var mark = marks[this.current];
    mark.classList.add("current");
    this.output.scrollTop = mark.offsetTop - this.output.offsetTop - this.output.clientHeight / 2;
  };

  document.addEventListener("DOMContentLoaded", function () {
    var pane = document.getElementById("log-pane");
    if (pane) { window.fuzzballLogPane = new LogPane(pane); }
  });
})();
