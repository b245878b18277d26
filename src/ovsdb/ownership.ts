// Ownership of OVN rows by external_ids: every row this product creates carries an owner tag, and
// everything that deletes or rewrites rows selects by that tag, so rows of others (ZStack's) are never touched.
// The tagging and the checks live with their users (src/ovn/ownership.ts for NB, src/node/ovs-port.ts for OVS).

/** The external_ids key that names the component owning a row. */
export const OWNER_KEY = "zstack.io/owner";
