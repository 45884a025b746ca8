/**
 * A person at the approval page over plain HTTP (the browser test drives Chromium through the same steps): the demo's
 * `LocalPerson`, which follows the sign-in redirects to the local dev issuer, signs in as `name` of `tenant`, and
 * approves or declines; each step it takes throws when the page answers otherwise.
 */
export { LocalPerson as PageVisitor } from '../../scripts/local-approver';
