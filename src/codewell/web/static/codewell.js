// codewell's one script (no build step). Pages work without it: it only adds the "/" shortcut.
document.addEventListener("keydown", function (event) {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) { return; }
  var target = event.target;
  if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) { return; }
  var box = document.querySelector("main input[type=search]") || document.getElementById("nav-q");
  if (box) { event.preventDefault(); box.focus(); box.select(); }
});
