// Progressive enhancement for scroll ui: every link here also works without this script.
// - <details data-src=URL>: the first time it opens, the text chunk at URL replaces its body.
// - <a data-more href=URL>: "load more" fetches the next chunk in place of the link
//   (data-replace: the chunk replaces the text shown before the link instead).
"use strict";

async function fetchChunk(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
  const template = document.createElement("template");
  template.innerHTML = await response.text(); // server-rendered, escaped fragment
  return template.content;
}

async function loadInto(link) {
  link.textContent = "loading…";
  try {
    const chunk = await fetchChunk(link.href);
    if (link.hasAttribute("data-replace")) {
      const shown = link.previousElementSibling;
      if (shown) shown.replaceChildren(...chunk.childNodes);
      link.remove();
    } else {
      link.replaceWith(chunk);
    }
  } catch (error) {
    link.textContent = `could not load (${error.message}); open it`;
    link.removeAttribute("data-more");
  }
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-more]");
  if (!link) return;
  event.preventDefault();
  loadInto(link);
});

document.addEventListener(
  "toggle",
  (event) => {
    const details = event.target;
    if (!(details instanceof HTMLDetailsElement) || !details.open) return;
    if (!details.dataset.src || details.dataset.loaded) return;
    details.dataset.loaded = "1";
    const link = details.querySelector("a[data-more]");
    if (link) loadInto(link);
  },
  true,
);
