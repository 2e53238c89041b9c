// Module hooks for check.mjs: Mermaid sanitises labels with DOMPurify, which needs a browser
// DOM; parsing needs no sanitising, so DOMPurify is replaced by a stub that returns its input.
const STUB = `const purify = {
  addHook() {}, removeHook() {}, removeHooks() {}, removeAllHooks() {},
  setConfig() {}, clearConfig() {}, isSupported: true, sanitize: (text) => text,
};
export default purify;`;

export async function resolve(specifier, context, next) {
  if (specifier === 'dompurify') {
    return { url: 'data:text/javascript,' + encodeURIComponent(STUB), shortCircuit: true };
  }
  return next(specifier, context);
}
