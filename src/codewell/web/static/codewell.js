// codewell's one script (no build step). Pages work without it: it adds the "/" shortcut, and in the file view the
// file finder ("t"), hover cards on identifiers, the references side panel and line anchors of long files.
(function () {
  "use strict";

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    if (event.key === "/") {
      var box = document.querySelector("main input[type=search]:not(#finder-q)") || document.getElementById("nav-q");
      if (box) { event.preventDefault(); box.focus(); box.select(); }
    } else if (event.key === "t" && document.querySelector(".finder-open")) {
      event.preventDefault();
      openFinder();
    } else if (event.key === "Escape") {
      hideHover();
    }
  });

  // -- line anchors: a long file shows one page of lines; #L<n> of another page asks the server for its page --
  function showLine() {
    var found = /^#L(\d+)$/.exec(location.hash);
    var table = document.querySelector("table.code[data-first]");
    if (!found || !table || document.getElementById("L" + found[1])) { return; }
    location.replace(location.pathname + "?L" + found[1] + "#L" + found[1]);
  }
  window.addEventListener("hashchange", showLine);
  showLine();

  // -- file finder: the revision's paths, fetched once, matched fuzzily (letters in order) as you type ---------
  var paths = null, shown = [], selected = 0;

  function score(path, query) {
    var lower = path.toLowerCase(), base = lower.lastIndexOf("/") + 1, at = 0, last = -2, total = 0;
    for (var i = 0; i < query.length; i++) {
      var found = lower.indexOf(query[i], at);
      if (found < 0) { return -1; }
      if (found === last + 1) { total += 5; }
      if (found >= base) { total += 2; }
      if (found === 0 || "/_-.".indexOf(lower[found - 1]) >= 0) { total += 3; }
      last = found; at = found + 1;
    }
    if (lower.indexOf(query, base) >= 0) { total += 10; }
    return total - path.length / 100;
  }

  function render(button) {
    var input = document.getElementById("finder-q"), list = document.getElementById("finder-list");
    var status = document.getElementById("finder-status"), query = input.value.trim().toLowerCase().replace(/\s+/g, "");
    if (paths === null) { status.textContent = "Loading the file list…"; return; }
    var scored = [];
    for (var i = 0; i < paths.length; i++) {
      var s = query ? score(paths[i], query) : 0;
      if (s >= 0) { scored.push([s, paths[i]]); }
    }
    if (query) { scored.sort(function (a, b) { return b[0] - a[0] || (a[1] < b[1] ? -1 : 1); }); }
    shown = scored.slice(0, 50);
    selected = 0;
    list.textContent = "";
    shown.forEach(function (item, index) {
      // Options hold text, not links (a link inside an option is a nested control): choosing one opens its file.
      var li = document.createElement("li");
      li.setAttribute("role", "option");
      li.id = "finder-option-" + index;
      li.dataset.href = button.dataset.blob + item[1].split("/").map(encodeURIComponent).join("/");
      li.textContent = item[1];
      li.addEventListener("click", function () { location.href = li.dataset.href; });
      list.appendChild(li);
    });
    status.textContent = scored.length + " of " + paths.length + " files" + (scored.length > 50 ? " (first 50 shown)" : "");
    mark();
  }

  function mark() {
    var input = document.getElementById("finder-q");
    document.querySelectorAll("#finder-list li").forEach(function (li, index) {
      li.setAttribute("aria-selected", index === selected ? "true" : "false");
      if (index === selected) { li.scrollIntoView({block: "nearest"}); }
    });
    if (shown.length) { input.setAttribute("aria-activedescendant", "finder-option-" + selected); }
    else { input.removeAttribute("aria-activedescendant"); }
  }

  function openFinder() {
    var button = document.querySelector(".finder-open"), dialog = document.getElementById("finder");
    if (!button || !dialog || dialog.open) { return; }
    dialog.showModal();
    var input = document.getElementById("finder-q");
    input.focus();
    input.select();
    if (paths === null) {
      render(button);
      fetch(button.dataset.files, {credentials: "same-origin"})
        .then(function (response) { if (!response.ok) { throw new Error(response.status); } return response.text(); })
        .then(function (text) { paths = text.split("\n").filter(Boolean); render(button); })
        .catch(function () { document.getElementById("finder-status").textContent = "The file list could not be loaded."; });
    }
  }

  function setUpFinder() {
    var button = document.querySelector(".finder-open"), input = document.getElementById("finder-q");
    if (!button || !input) { return; }
    button.hidden = false;
    button.addEventListener("click", openFinder);
    input.addEventListener("input", function () { render(button); });
    input.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        if (!shown.length) { return; }
        selected = (selected + (event.key === "ArrowDown" ? 1 : shown.length - 1)) % shown.length;
        mark();
      } else if (event.key === "Enter") {
        event.preventDefault();
        var option = document.getElementById("finder-option-" + selected);
        if (option) { location.href = option.dataset.href; }
      } else if (event.key === "Escape") {
        // A search box's Escape only clears the box: here it closes the finder, as in other code hosts.
        event.preventDefault();
        document.getElementById("finder").close();
      }
    });
  }

  // -- hover cards: the definition line and docs of an identifier, fetched once per link ---------------------
  var card = null, timer = null, cards = {}, current = null;

  function hideHover() {
    clearTimeout(timer);
    if (card) { card.hidden = true; }
  }

  function showHover(link) {
    var href = link.getAttribute("href");
    function place(html) {
      if (!card) {
        card = document.createElement("div");
        card.id = "hover-card";
        card.setAttribute("role", "tooltip");
        card.className = "hover";
        card.addEventListener("mouseleave", hideHover);
        document.body.appendChild(card);
      }
      card.innerHTML = html;  // the server's escaped fragment (web/hover.html), same origin
      var box = link.getBoundingClientRect();
      card.style.left = Math.round(window.scrollX + box.left) + "px";
      card.style.top = Math.round(window.scrollY + box.bottom + 4) + "px";
      card.hidden = false;
      link.setAttribute("aria-describedby", "hover-card");
    }
    if (cards[href] !== undefined) { if (cards[href]) { place(cards[href]); } return; }
    fetch(href + "&view=hover", {credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.text() : ""; })
      .then(function (html) { cards[href] = html; if (html && current === link) { place(html); } })
      .catch(function () { cards[href] = ""; });
  }

  function definitionLink(target) {
    return target && target.closest ? target.closest('table.code a.ident[title="Go to definition"]') : null;
  }

  function setUpHover() {
    ["mouseover", "focusin"].forEach(function (kind) {
      document.addEventListener(kind, function (event) {
        var link = definitionLink(event.target);
        if (!link) { return; }
        clearTimeout(timer);
        current = link;
        timer = setTimeout(function () { showHover(link); }, kind === "focusin" ? 0 : 300);
      });
    });
    ["mouseout", "focusout"].forEach(function (kind) {
      document.addEventListener(kind, function (event) {
        var link = definitionLink(event.target);
        if (!link) { return; }
        if (event.relatedTarget && link.contains(event.relatedTarget)) { return; }
        clearTimeout(timer);
        current = null;
        timer = setTimeout(function () { if (card && !card.matches(":hover")) { hideHover(); } }, 200);
      });
    });
  }

  // -- references side panel: "Find references" links open beside the file, the page stays where it is ----------
  function setUpReferences() {
    var panel = document.getElementById("refs-panel");
    if (!panel) { return; }
    document.addEventListener("click", function (event) {
      if (event.target.closest && event.target.closest(".refs-close")) {
        panel.hidden = true;
        panel.parentElement.classList.remove("with-panel");
        return;
      }
      var link = event.target.closest ? event.target.closest('table.code a.ident[title="Find references"]') : null;
      if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) { return; }
      event.preventDefault();
      panel.hidden = false;
      panel.parentElement.classList.add("with-panel");
      panel.setAttribute("aria-busy", "true");
      panel.textContent = "Finding references…";
      fetch(link.getAttribute("href") + "&view=panel", {credentials: "same-origin"})
        .then(function (response) { if (!response.ok) { throw new Error(response.status); } return response.text(); })
        .then(function (html) {
          panel.innerHTML = html;  // the server's escaped fragment (web/references_panel.html), same origin
          panel.removeAttribute("aria-busy");
          var heading = panel.querySelector("h2");
          if (heading) { heading.tabIndex = -1; heading.focus(); }
        })
        .catch(function () { location.href = link.href; });
    });
  }

  setUpFinder();
  setUpHover();
  setUpReferences();
})();

// -- search page: a changed toggle (regex, case, whole word, context lines) searches again at once ------------
(function () {
  "use strict";
  var form = document.querySelector("main form.search");
  if (!form) { return; }
  form.addEventListener("change", function (event) {
    var field = event.target;
    if (!field.closest || !field.closest("fieldset.toggles")) { return; }
    var box = form.querySelector("input[name=q]");
    if (box && box.value.trim()) { form.requestSubmit(); }
  });
})();

// -- site configuration page: the text is checked as you type (the server's own validation, nothing saved) ----
(function () {
  "use strict";
  var form = document.querySelector("form[data-check-as-you-type]");
  if (!form) { return; }
  var box = form.querySelector("textarea[name=config]");
  var out = document.getElementById("config-check");
  var timer = null;
  var asked = 0;
  function check() {
    var mine = ++asked;
    var body = new FormData(form);
    body.set("check", "1");
    fetch(form.action, { method: "POST", body: body, credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null || mine !== asked) { return; }  // an older answer than the text shown: dropped
        out.innerHTML = html;
        box.setAttribute("aria-invalid", out.querySelector("#config-errors") ? "true" : "false");
      })
      .catch(function () { /* offline: Save still checks */ });
  }
  box.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(check, 400);
  });
})();
