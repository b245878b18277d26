// The NB rows that realize one NetworkPolicy, as plain data: its port group (the ports are the reconciler's,
// given as a diff), one allow-related ACL per rule and per resolved named port, and the named-port address sets.
// Ingress ACLs are to-lport on `outport == @group`; egress ACLs are from-lport on `inport == @group` with
// apply-after-lb, so a connection to a ClusterIP is judged by the backend it was balanced to. Every text of a
// match is produced here from typed values (addresses, CIDRs, port numbers, enum protocols, hashed names).

import { type Family, formatIp, type IpAddress } from "../ipam/address.ts";
import { type Cidr, formatCidr } from "../ipam/cidr.ts";
import type { DesiredRow } from "../ovn/nb-diff.ts";
import { ownedIds } from "../ovn/ownership.ts";
import { POLICY_ALLOW } from "./acl-priority.ts";
import {
  namedSetId,
  namedSetName,
  POLICY_KEY,
  peerSetName,
  policyAclId,
  policyGroupId,
  policyGroupName,
} from "./nb-names.ts";
import {
  type Direction,
  type IpBlockPeer,
  type PolicyModel,
  type PolicyRule,
  type PortMatch,
  type Protocol,
  peerKey,
} from "./policy-model.ts";

export interface PolicyInputs {
  /** The cluster's address families: peer and named sets exist for these. */
  readonly families: readonly Family[];
  /** Ingress named port: port number → addresses of the policy's selected pods declaring it. */
  ingressNamed(name: string, protocol: Protocol): ReadonlyMap<number, readonly IpAddress[]>;
  /** Egress named port of rule `rule`: port number → addresses of that rule's peer pods declaring it. */
  egressNamed(rule: number, name: string, protocol: Protocol): ReadonlyMap<number, readonly IpAddress[]>;
  /** Management IPs of the nodes with an address inside the block and not in its except (host traffic's source). */
  nodeMgmtIps(block: IpBlockPeer): readonly IpAddress[];
}

export interface PolicyRows {
  /** Port_Group first, then its ACLs (children, parent by id). Its `ports` are not here. */
  readonly rows: DesiredRow[];
  readonly groupName: string;
  readonly groupId: string;
  /** The named-port address sets: name → addresses (formatted), ids and external_ids included in `rows`. */
  readonly namedSets: ReadonlyMap<string, readonly string[]>;
}

const ipField = (f: Family) => (f === 4 ? "ip4" : "ip6");

function inSet(family: Family, side: "src" | "dst", set: string): string {
  return `${ipField(family)}.${side} == $${set}`;
}

function blockMatch(b: IpBlockPeer, side: "src" | "dst", extra: readonly IpAddress[]): string {
  const f = ipField(b.cidr.family);
  let m = `${f}.${side} == ${formatCidr(b.cidr)}`;
  if (b.except.length > 0)
    m += ` && ${f}.${side} != {${b.except.map((c: Cidr) => formatCidr(c)).join(", ")}}`;
  const alts = [b.except.length > 0 ? `(${m})` : m];
  for (const fam of [4, 6] as const) {
    const ips = extra.filter((ip) => ip.family === fam);
    if (ips.length > 0) alts.push(`${ipField(fam)}.${side} == {${ips.map(formatIp).join(", ")}}`);
  }
  // Parenthesized when it is a disjunction: it is ANDed with the rest of the match.
  return alts.length === 1 ? (alts[0] as string) : `(${alts.join(" || ")})`;
}

function portTerm(p: Exclude<PortMatch, { kind: "named" }>): string {
  if (p.kind === "any") return p.protocol;
  if (p.from === p.to) return `${p.protocol}.dst == ${p.from}`;
  return `${p.from} <= ${p.protocol}.dst <= ${p.to}`;
}

function or(terms: readonly string[]): string {
  return terms.length === 1 ? (terms[0] as string) : `(${terms.join(" || ")})`;
}

/** The rows of one policy, given what its named ports resolve to and which nodes its ipBlocks cover. */
export function policyRows(m: PolicyModel, inputs: PolicyInputs): PolicyRows {
  const groupName = policyGroupName(m.key);
  const groupId = policyGroupId(m.key);
  const tag = { [POLICY_KEY]: m.key };
  const acls = new Map<string, DesiredRow>();
  const namedSets = new Map<string, readonly string[]>();
  const setRows: DesiredRow[] = [];

  const addAcl = (direction: Direction, match: string) => {
    const dir = direction === "ingress" ? "to-lport" : "from-lport";
    const id = policyAclId(m.key, dir, match);
    acls.set(id, {
      table: "ACL",
      id,
      row: {
        direction: dir,
        priority: POLICY_ALLOW,
        action: "allow-related",
        match,
        options: direction === "egress" ? { "apply-after-lb": "true" } : {},
        external_ids: ownedIds("network-policy-acl", id, tag),
      },
      parent: { table: "Port_Group", id: groupId, column: "acls" },
    });
  };

  const addNamedSet = (name: string, ips: readonly IpAddress[]) => {
    const id = namedSetId(m.key, name);
    const addresses = [...new Set(ips.map(formatIp))].sort();
    namedSets.set(name, addresses);
    setRows.push({
      table: "Address_Set",
      id,
      row: { name, addresses, external_ids: ownedIds("network-policy-named", id, tag) },
    });
  };

  const direction = (dir: Direction, rules: readonly PolicyRule[]) => {
    const port = dir === "ingress" ? "outport" : "inport";
    const peerSide = dir === "ingress" ? "src" : "dst";
    const base = `${port} == @${groupName}`;
    rules.forEach((r, i) => {
      let peerTerm: string | undefined;
      if (r.peers !== "all") {
        const alts: string[] = [];
        for (const p of r.peers) {
          if (p.kind === "pods") {
            const key = peerKey(p);
            for (const f of inputs.families) alts.push(inSet(f, peerSide, peerSetName(key, f)));
          } else {
            alts.push(blockMatch(p, peerSide, dir === "ingress" ? inputs.nodeMgmtIps(p) : []));
          }
        }
        peerTerm = or(alts);
      }
      const peer = peerTerm ? ` && ${peerTerm}` : "";
      if (r.ports === "all") {
        addAcl(dir, peerTerm ? `${base}${peer}` : `${base} && ip`);
        return;
      }
      const plain = r.ports.filter((p) => p.kind !== "named");
      if (plain.length > 0) {
        const terms = [...new Set(plain.map(portTerm))];
        addAcl(dir, `${base}${peer} && ${or(terms)}`);
      }
      const named = new Map<string, { name: string; protocol: Protocol }>();
      for (const p of r.ports) if (p.kind === "named") named.set(`${p.name}/${p.protocol}`, p);
      for (const { name, protocol } of named.values()) {
        const resolved =
          dir === "ingress" ? inputs.ingressNamed(name, protocol) : inputs.egressNamed(i, name, protocol);
        for (const [number, ips] of [...resolved].sort(([a], [b]) => a - b)) {
          const sets: string[] = [];
          for (const f of inputs.families) {
            const mine = ips.filter((ip) => ip.family === f);
            if (mine.length === 0) continue;
            const setName = namedSetName(
              m.key,
              dir,
              dir === "egress" ? i : undefined,
              name,
              protocol,
              number,
              f,
            );
            if (!namedSets.has(setName)) addNamedSet(setName, mine);
            // The named set holds the destination pods: in ingress the selected pods, in egress the peers.
            sets.push(inSet(f, "dst", setName));
          }
          if (sets.length === 0) continue;
          // In egress the set already is the rule's peers that declare the port: no peer term is needed.
          const peerPart = dir === "ingress" ? peer : "";
          addAcl(dir, `${base} && ${or(sets)} && ${protocol}.dst == ${number}${peerPart}`);
        }
      }
    });
  };
  if (m.ingress) direction("ingress", m.ingress);
  if (m.egress) direction("egress", m.egress);

  const group: DesiredRow = {
    table: "Port_Group",
    id: groupId,
    row: { name: groupName, external_ids: ownedIds("network-policy", groupId, tag) },
  };
  return { rows: [...setRows, group, ...acls.values()], groupName, groupId, namedSets };
}
