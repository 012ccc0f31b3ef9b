// The view of a question's (predict.py) hidden helper widget: once the prediction is in, it opens, in the page,
// every answer drawn closed for that question (the reveal cells' outputs are plain HTML, kept as stored outputs
// for nbval), found by the key they carry, and puts the comparison where the hint was.
function openAnswers(opened) {
  for (const [key, sentence] of Object.entries(opened || {})) {
    for (const box of document.querySelectorAll(`.tinyserve-answer[data-question="${key}"]:not(.tinyserve-opened)`)) {
      box.classList.add("tinyserve-opened");
      const hint = box.querySelector(".tinyserve-hint");
      if (hint) hint.textContent = sentence;
      const details = box.querySelector("details");
      if (details) details.replaceWith(...[...details.childNodes].filter(n => n.tagName !== "SUMMARY"));
    }
  }
}
// a page may draw a cell's output later (a notebook that draws only the cells in view): open it when it comes,
// for as long as this question lives (a restarted kernel's new question opens nothing of the old one's)
export default { render({ model }) {
  const open = () => openAnswers(model.get("opened"));
  model.on("change:opened", open);
  open();
  const watch = new MutationObserver(() => { if (Object.keys(model.get("opened") || {}).length) open(); });
  watch.observe(document.body, { childList: true, subtree: true });
  return () => watch.disconnect();
} };
