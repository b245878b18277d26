// GENERATED FILE, DO NOT EDIT. Regenerate with `node --import tsx tools/gen-models.ts` (make models).
// Source: /usr/share/ovn/ovn-nb.ovsschema, schema OVN_Northbound version 7.0.0, cksum 94023179 33468.
//
// One interface per table describes a row as the cache holds it; property names are the column names.
// Column kinds: scalar -> the atom, optional -> atom | null, set -> readonly array, map -> readonly object keyed
// by the key atom as a string. Enumerations are literal unions. uuid columns have type Uuid (a string whose
// phantom brand lets InsertRow/UpdateRow see them), so `XxxInsert` = InsertRow<Xxx> accepts a NamedUuid wherever
// the column, a set element or a map value is a uuid.

import { type InsertRow, type Uuid, defineModel } from "../model.ts";

/** ACL: non-root table (rows without a strong reference are deleted). */
export interface ACL {
  readonly _uuid: Uuid;
  readonly action: "allow" | "allow-related" | "allow-stateless" | "drop" | "reject";
  readonly direction: "from-lport" | "to-lport";
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer 0..4294967295 */
  readonly label: number;
  readonly log: boolean;
  readonly match: string;
  readonly meter: string | null;
  /** length ..63 */
  readonly name: string | null;
  readonly options: Readonly<Record<string, string>>;
  /** integer 0..32767 */
  readonly priority: number;
  readonly severity: "alert" | "warning" | "notice" | "info" | "debug" | null;
}
export type ACLInsert = InsertRow<ACL>;

/** Address_Set: root table; indexes: (name). */
export interface AddressSet {
  readonly _uuid: Uuid;
  readonly addresses: readonly string[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly name: string;
}
export type AddressSetInsert = InsertRow<AddressSet>;

/** BFD: root table; indexes: (logical_port, dst_ip). */
export interface BFD {
  readonly _uuid: Uuid;
  /** integer 1.. */
  readonly detect_mult: number | null;
  readonly dst_ip: string;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly logical_port: string;
  /** integer */
  readonly min_rx: number | null;
  /** integer 1.. */
  readonly min_tx: number | null;
  readonly options: Readonly<Record<string, string>>;
  readonly status: "down" | "init" | "up" | "admin_down" | null;
}
export type BFDInsert = InsertRow<BFD>;

/** Chassis_Template_Var: root table; indexes: (chassis). */
export interface ChassisTemplateVar {
  readonly _uuid: Uuid;
  readonly chassis: string;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly variables: Readonly<Record<string, string>>;
}
export type ChassisTemplateVarInsert = InsertRow<ChassisTemplateVar>;

/** Connection: non-root table (rows without a strong reference are deleted); indexes: (target). */
export interface Connection {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer */
  readonly inactivity_probe: number | null;
  /** ephemeral */
  readonly is_connected: boolean;
  /** integer 1000.. */
  readonly max_backoff: number | null;
  readonly other_config: Readonly<Record<string, string>>;
  /** ephemeral */
  readonly status: Readonly<Record<string, string>>;
  readonly target: string;
}
export type ConnectionInsert = InsertRow<Connection>;

/** Copp: root table; indexes: (name). */
export interface Copp {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly meters: Readonly<Record<string, string>>;
  readonly name: string;
}
export type CoppInsert = InsertRow<Copp>;

/** DHCP_Options: root table. */
export interface DHCPOptions {
  readonly _uuid: Uuid;
  readonly cidr: string;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly options: Readonly<Record<string, string>>;
}
export type DHCPOptionsInsert = InsertRow<DHCPOptions>;

/** DNS: root table. */
export interface DNS {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly records: Readonly<Record<string, string>>;
}
export type DNSInsert = InsertRow<DNS>;

/** Forwarding_Group: non-root table (rows without a strong reference are deleted). */
export interface ForwardingGroup {
  readonly _uuid: Uuid;
  /** 1.. elements */
  readonly child_port: readonly string[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly liveness: boolean;
  readonly name: string;
  readonly vip: string;
  readonly vmac: string;
}
export type ForwardingGroupInsert = InsertRow<ForwardingGroup>;

/** Gateway_Chassis: non-root table (rows without a strong reference are deleted); indexes: (name). */
export interface GatewayChassis {
  readonly _uuid: Uuid;
  readonly chassis_name: string;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly name: string;
  readonly options: Readonly<Record<string, string>>;
  /** integer 0..32767 */
  readonly priority: number;
}
export type GatewayChassisInsert = InsertRow<GatewayChassis>;

/** HA_Chassis: non-root table (rows without a strong reference are deleted). */
export interface HAChassis {
  readonly _uuid: Uuid;
  readonly chassis_name: string;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer 0..32767 */
  readonly priority: number;
}
export type HAChassisInsert = InsertRow<HAChassis>;

/** HA_Chassis_Group: root table; indexes: (name). */
export interface HAChassisGroup {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  /** strong ref to HA_Chassis */
  readonly ha_chassis: readonly Uuid[];
  readonly name: string;
}
export type HAChassisGroupInsert = InsertRow<HAChassisGroup>;

/** Load_Balancer: root table. */
export interface LoadBalancer {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  /** strong ref to Load_Balancer_Health_Check */
  readonly health_check: readonly Uuid[];
  readonly ip_port_mappings: Readonly<Record<string, string>>;
  readonly name: string;
  readonly options: Readonly<Record<string, string>>;
  readonly protocol: "tcp" | "udp" | "sctp" | null;
  readonly selection_fields: readonly ("eth_src" | "eth_dst" | "ip_src" | "ip_dst" | "tp_src" | "tp_dst")[];
  readonly vips: Readonly<Record<string, string>>;
}
export type LoadBalancerInsert = InsertRow<LoadBalancer>;

/** Load_Balancer_Group: root table; indexes: (name). */
export interface LoadBalancerGroup {
  readonly _uuid: Uuid;
  /** weak ref to Load_Balancer */
  readonly load_balancer: readonly Uuid[];
  readonly name: string;
}
export type LoadBalancerGroupInsert = InsertRow<LoadBalancerGroup>;

/** Load_Balancer_Health_Check: non-root table (rows without a strong reference are deleted). */
export interface LoadBalancerHealthCheck {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly options: Readonly<Record<string, string>>;
  readonly vip: string;
}
export type LoadBalancerHealthCheckInsert = InsertRow<LoadBalancerHealthCheck>;

/** Logical_Router: root table. */
export interface LogicalRouter {
  readonly _uuid: Uuid;
  /** weak ref to Copp */
  readonly copp: Uuid | null;
  readonly enabled: boolean | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** weak ref to Load_Balancer */
  readonly load_balancer: readonly Uuid[];
  /** strong ref to Load_Balancer_Group */
  readonly load_balancer_group: readonly Uuid[];
  readonly name: string;
  /** strong ref to NAT */
  readonly nat: readonly Uuid[];
  readonly options: Readonly<Record<string, string>>;
  /** strong ref to Logical_Router_Policy */
  readonly policies: readonly Uuid[];
  /** strong ref to Logical_Router_Port */
  readonly ports: readonly Uuid[];
  /** strong ref to Logical_Router_Static_Route */
  readonly static_routes: readonly Uuid[];
}
export type LogicalRouterInsert = InsertRow<LogicalRouter>;

/** Logical_Router_Policy: non-root table (rows without a strong reference are deleted). */
export interface LogicalRouterPolicy {
  readonly _uuid: Uuid;
  readonly action: "allow" | "drop" | "reroute";
  readonly external_ids: Readonly<Record<string, string>>;
  readonly match: string;
  readonly nexthop: string | null;
  readonly nexthops: readonly string[];
  readonly options: Readonly<Record<string, string>>;
  /** integer 0..32767 */
  readonly priority: number;
}
export type LogicalRouterPolicyInsert = InsertRow<LogicalRouterPolicy>;

/** Logical_Router_Port: non-root table (rows without a strong reference are deleted); indexes: (name). */
export interface LogicalRouterPort {
  readonly _uuid: Uuid;
  readonly enabled: boolean | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** strong ref to Gateway_Chassis */
  readonly gateway_chassis: readonly Uuid[];
  /** strong ref to HA_Chassis_Group */
  readonly ha_chassis_group: Uuid | null;
  readonly ipv6_prefix: readonly string[];
  readonly ipv6_ra_configs: Readonly<Record<string, string>>;
  readonly mac: string;
  readonly name: string;
  /** 1.. elements */
  readonly networks: readonly string[];
  readonly options: Readonly<Record<string, string>>;
  readonly peer: string | null;
}
export type LogicalRouterPortInsert = InsertRow<LogicalRouterPort>;

/** Logical_Router_Static_Route: non-root table (rows without a strong reference are deleted). */
export interface LogicalRouterStaticRoute {
  readonly _uuid: Uuid;
  /** weak ref to BFD */
  readonly bfd: Uuid | null;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly ip_prefix: string;
  readonly nexthop: string;
  readonly options: Readonly<Record<string, string>>;
  readonly output_port: string | null;
  readonly policy: "src-ip" | "dst-ip" | null;
  readonly route_table: string;
}
export type LogicalRouterStaticRouteInsert = InsertRow<LogicalRouterStaticRoute>;

/** Logical_Switch: root table. */
export interface LogicalSwitch {
  readonly _uuid: Uuid;
  /** strong ref to ACL */
  readonly acls: readonly Uuid[];
  /** weak ref to Copp */
  readonly copp: Uuid | null;
  /** weak ref to DNS */
  readonly dns_records: readonly Uuid[];
  readonly external_ids: Readonly<Record<string, string>>;
  /** strong ref to Forwarding_Group */
  readonly forwarding_groups: readonly Uuid[];
  /** weak ref to Load_Balancer */
  readonly load_balancer: readonly Uuid[];
  /** strong ref to Load_Balancer_Group */
  readonly load_balancer_group: readonly Uuid[];
  readonly name: string;
  readonly other_config: Readonly<Record<string, string>>;
  /** strong ref to Logical_Switch_Port */
  readonly ports: readonly Uuid[];
  /** strong ref to QoS */
  readonly qos_rules: readonly Uuid[];
}
export type LogicalSwitchInsert = InsertRow<LogicalSwitch>;

/** Logical_Switch_Port: non-root table (rows without a strong reference are deleted); indexes: (name). */
export interface LogicalSwitchPort {
  readonly _uuid: Uuid;
  readonly addresses: readonly string[];
  /** weak ref to DHCP_Options */
  readonly dhcpv4_options: Uuid | null;
  /** weak ref to DHCP_Options */
  readonly dhcpv6_options: Uuid | null;
  readonly dynamic_addresses: string | null;
  readonly enabled: boolean | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** strong ref to HA_Chassis_Group */
  readonly ha_chassis_group: Uuid | null;
  /** weak ref to Mirror */
  readonly mirror_rules: readonly Uuid[];
  readonly name: string;
  readonly options: Readonly<Record<string, string>>;
  readonly parent_name: string | null;
  readonly port_security: readonly string[];
  /** integer 1..4095 */
  readonly tag: number | null;
  /** integer 0..4095 */
  readonly tag_request: number | null;
  readonly type: string;
  readonly up: boolean | null;
}
export type LogicalSwitchPortInsert = InsertRow<LogicalSwitchPort>;

/** Meter: root table; indexes: (name). */
export interface Meter {
  readonly _uuid: Uuid;
  /** strong ref to Meter_Band; 1.. elements */
  readonly bands: readonly Uuid[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly fair: boolean | null;
  readonly name: string;
  readonly unit: "kbps" | "pktps";
}
export type MeterInsert = InsertRow<Meter>;

/** Meter_Band: non-root table (rows without a strong reference are deleted). */
export interface MeterBand {
  readonly _uuid: Uuid;
  readonly action: "drop";
  /** integer 0..4294967295 */
  readonly burst_size: number;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer 1..4294967295 */
  readonly rate: number;
}
export type MeterBandInsert = InsertRow<MeterBand>;

/** Mirror: root table; indexes: (name). */
export interface Mirror {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly filter: "from-lport" | "to-lport";
  /** integer */
  readonly index: number;
  readonly name: string;
  readonly sink: string;
  readonly type: "gre" | "erspan";
}
export type MirrorInsert = InsertRow<Mirror>;

/** NAT: non-root table (rows without a strong reference are deleted). */
export interface NAT {
  readonly _uuid: Uuid;
  /** strong ref to Address_Set */
  readonly allowed_ext_ips: Uuid | null;
  /** strong ref to Address_Set */
  readonly exempted_ext_ips: Uuid | null;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly external_ip: string;
  readonly external_mac: string | null;
  readonly external_port_range: string;
  /** weak ref to Logical_Router_Port */
  readonly gateway_port: Uuid | null;
  readonly logical_ip: string;
  readonly logical_port: string | null;
  readonly options: Readonly<Record<string, string>>;
  readonly type: "dnat" | "snat" | "dnat_and_snat";
}
export type NATInsert = InsertRow<NAT>;

/** NB_Global: root table; at most 1 rows. */
export interface NBGlobal {
  readonly _uuid: Uuid;
  /** strong ref to Connection */
  readonly connections: readonly Uuid[];
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer */
  readonly hv_cfg: number;
  /** integer */
  readonly hv_cfg_timestamp: number;
  readonly ipsec: boolean;
  readonly name: string;
  /** integer */
  readonly nb_cfg: number;
  /** integer */
  readonly nb_cfg_timestamp: number;
  readonly options: Readonly<Record<string, string>>;
  /** integer */
  readonly sb_cfg: number;
  /** integer */
  readonly sb_cfg_timestamp: number;
  /** strong ref to SSL */
  readonly ssl: Uuid | null;
}
export type NBGlobalInsert = InsertRow<NBGlobal>;

/** Port_Group: root table; indexes: (name). */
export interface PortGroup {
  readonly _uuid: Uuid;
  /** strong ref to ACL */
  readonly acls: readonly Uuid[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly name: string;
  /** weak ref to Logical_Switch_Port */
  readonly ports: readonly Uuid[];
}
export type PortGroupInsert = InsertRow<PortGroup>;

/** QoS: non-root table (rows without a strong reference are deleted). */
export interface QoS {
  readonly _uuid: Uuid;
  /** value integer 0..63 */
  readonly action: Readonly<Partial<Record<"dscp", number>>>;
  /** value integer 1..4294967295 */
  readonly bandwidth: Readonly<Partial<Record<"rate" | "burst", number>>>;
  readonly direction: "from-lport" | "to-lport";
  readonly external_ids: Readonly<Record<string, string>>;
  readonly match: string;
  /** integer 0..32767 */
  readonly priority: number;
}
export type QoSInsert = InsertRow<QoS>;

/** SSL: non-root table (rows without a strong reference are deleted); at most 1 rows. */
export interface SSL {
  readonly _uuid: Uuid;
  readonly bootstrap_ca_cert: boolean;
  readonly ca_cert: string;
  readonly certificate: string;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly private_key: string;
  readonly ssl_ciphers: string;
  readonly ssl_protocols: string;
}
export type SSLInsert = InsertRow<SSL>;

/** Static_MAC_Binding: root table; indexes: (logical_port, ip). */
export interface StaticMACBinding {
  readonly _uuid: Uuid;
  readonly ip: string;
  readonly logical_port: string;
  readonly mac: string;
  readonly override_dynamic_mac: boolean;
}
export type StaticMACBindingInsert = InsertRow<StaticMACBinding>;

export type NbTables = {
  ACL: ACL;
  Address_Set: AddressSet;
  BFD: BFD;
  Chassis_Template_Var: ChassisTemplateVar;
  Connection: Connection;
  Copp: Copp;
  DHCP_Options: DHCPOptions;
  DNS: DNS;
  Forwarding_Group: ForwardingGroup;
  Gateway_Chassis: GatewayChassis;
  HA_Chassis: HAChassis;
  HA_Chassis_Group: HAChassisGroup;
  Load_Balancer: LoadBalancer;
  Load_Balancer_Group: LoadBalancerGroup;
  Load_Balancer_Health_Check: LoadBalancerHealthCheck;
  Logical_Router: LogicalRouter;
  Logical_Router_Policy: LogicalRouterPolicy;
  Logical_Router_Port: LogicalRouterPort;
  Logical_Router_Static_Route: LogicalRouterStaticRoute;
  Logical_Switch: LogicalSwitch;
  Logical_Switch_Port: LogicalSwitchPort;
  Meter: Meter;
  Meter_Band: MeterBand;
  Mirror: Mirror;
  NAT: NAT;
  NB_Global: NBGlobal;
  Port_Group: PortGroup;
  QoS: QoS;
  SSL: SSL;
  Static_MAC_Binding: StaticMACBinding;
};

export const nbSchemaJson: unknown = {"name":"OVN_Northbound","version":"7.0.0","cksum":"94023179 33468","tables":{"NB_Global":{"columns":{"name":{"type":"string"},"nb_cfg":{"type":{"key":"integer"}},"nb_cfg_timestamp":{"type":{"key":"integer"}},"sb_cfg":{"type":{"key":"integer"}},"sb_cfg_timestamp":{"type":{"key":"integer"}},"hv_cfg":{"type":{"key":"integer"}},"hv_cfg_timestamp":{"type":{"key":"integer"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"connections":{"type":{"key":{"type":"uuid","refTable":"Connection"},"min":0,"max":"unlimited"}},"ssl":{"type":{"key":{"type":"uuid","refTable":"SSL"},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"ipsec":{"type":"boolean"}},"maxRows":1,"isRoot":true},"Copp":{"columns":{"name":{"type":"string"},"meters":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Logical_Switch":{"columns":{"name":{"type":"string"},"ports":{"type":{"key":{"type":"uuid","refTable":"Logical_Switch_Port","refType":"strong"},"min":0,"max":"unlimited"}},"acls":{"type":{"key":{"type":"uuid","refTable":"ACL","refType":"strong"},"min":0,"max":"unlimited"}},"qos_rules":{"type":{"key":{"type":"uuid","refTable":"QoS","refType":"strong"},"min":0,"max":"unlimited"}},"load_balancer":{"type":{"key":{"type":"uuid","refTable":"Load_Balancer","refType":"weak"},"min":0,"max":"unlimited"}},"load_balancer_group":{"type":{"key":{"type":"uuid","refTable":"Load_Balancer_Group"},"min":0,"max":"unlimited"}},"dns_records":{"type":{"key":{"type":"uuid","refTable":"DNS","refType":"weak"},"min":0,"max":"unlimited"}},"copp":{"type":{"key":{"type":"uuid","refTable":"Copp","refType":"weak"},"min":0,"max":1}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"forwarding_groups":{"type":{"key":{"type":"uuid","refTable":"Forwarding_Group","refType":"strong"},"min":0,"max":"unlimited"}}},"isRoot":true},"Logical_Switch_Port":{"columns":{"name":{"type":"string"},"type":{"type":"string"},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"parent_name":{"type":{"key":"string","min":0,"max":1}},"tag_request":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4095},"min":0,"max":1}},"tag":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":4095},"min":0,"max":1}},"addresses":{"type":{"key":"string","min":0,"max":"unlimited"}},"dynamic_addresses":{"type":{"key":"string","min":0,"max":1}},"port_security":{"type":{"key":"string","min":0,"max":"unlimited"}},"up":{"type":{"key":"boolean","min":0,"max":1}},"enabled":{"type":{"key":"boolean","min":0,"max":1}},"dhcpv4_options":{"type":{"key":{"type":"uuid","refTable":"DHCP_Options","refType":"weak"},"min":0,"max":1}},"dhcpv6_options":{"type":{"key":{"type":"uuid","refTable":"DHCP_Options","refType":"weak"},"min":0,"max":1}},"mirror_rules":{"type":{"key":{"type":"uuid","refTable":"Mirror","refType":"weak"},"min":0,"max":"unlimited"}},"ha_chassis_group":{"type":{"key":{"type":"uuid","refTable":"HA_Chassis_Group","refType":"strong"},"min":0,"max":1}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":false},"Forwarding_Group":{"columns":{"name":{"type":"string"},"vip":{"type":"string"},"vmac":{"type":"string"},"liveness":{"type":"boolean"},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"child_port":{"type":{"key":"string","min":1,"max":"unlimited"}}},"isRoot":false},"Address_Set":{"columns":{"name":{"type":"string"},"addresses":{"type":{"key":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Port_Group":{"columns":{"name":{"type":"string"},"ports":{"type":{"key":{"type":"uuid","refTable":"Logical_Switch_Port","refType":"weak"},"min":0,"max":"unlimited"}},"acls":{"type":{"key":{"type":"uuid","refTable":"ACL","refType":"strong"},"min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Load_Balancer":{"columns":{"name":{"type":"string"},"vips":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"protocol":{"type":{"key":{"type":"string","enum":["set",["tcp","udp","sctp"]]},"min":0,"max":1}},"health_check":{"type":{"key":{"type":"uuid","refTable":"Load_Balancer_Health_Check","refType":"strong"},"min":0,"max":"unlimited"}},"ip_port_mappings":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"selection_fields":{"type":{"key":{"type":"string","enum":["set",["eth_src","eth_dst","ip_src","ip_dst","tp_src","tp_dst"]]},"min":0,"max":"unlimited"}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"Load_Balancer_Group":{"columns":{"name":{"type":"string"},"load_balancer":{"type":{"key":{"type":"uuid","refTable":"Load_Balancer","refType":"weak"},"min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Load_Balancer_Health_Check":{"columns":{"vip":{"type":"string"},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"ACL":{"columns":{"name":{"type":{"key":{"type":"string","maxLength":63},"min":0,"max":1}},"priority":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":32767}}},"direction":{"type":{"key":{"type":"string","enum":["set",["from-lport","to-lport"]]}}},"match":{"type":"string"},"action":{"type":{"key":{"type":"string","enum":["set",["allow","allow-related","allow-stateless","drop","reject"]]}}},"log":{"type":"boolean"},"severity":{"type":{"key":{"type":"string","enum":["set",["alert","warning","notice","info","debug"]]},"min":0,"max":1}},"meter":{"type":{"key":"string","min":0,"max":1}},"label":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295}}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"QoS":{"columns":{"priority":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":32767}}},"direction":{"type":{"key":{"type":"string","enum":["set",["from-lport","to-lport"]]}}},"match":{"type":"string"},"action":{"type":{"key":{"type":"string","enum":["set",["dscp"]]},"value":{"type":"integer","minInteger":0,"maxInteger":63},"min":0,"max":"unlimited"}},"bandwidth":{"type":{"key":{"type":"string","enum":["set",["rate","burst"]]},"value":{"type":"integer","minInteger":1,"maxInteger":4294967295},"min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"Mirror":{"columns":{"name":{"type":"string"},"filter":{"type":{"key":{"type":"string","enum":["set",["from-lport","to-lport"]]}}},"sink":{"type":"string"},"type":{"type":{"key":{"type":"string","enum":["set",["gre","erspan"]]}}},"index":{"type":"integer"},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Meter":{"columns":{"name":{"type":"string"},"unit":{"type":{"key":{"type":"string","enum":["set",["kbps","pktps"]]}}},"bands":{"type":{"key":{"type":"uuid","refTable":"Meter_Band","refType":"strong"},"min":1,"max":"unlimited"}},"fair":{"type":{"key":"boolean","min":0,"max":1}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Meter_Band":{"columns":{"action":{"type":{"key":{"type":"string","enum":["set",["drop"]]}}},"rate":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":4294967295}}},"burst_size":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295}}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"Logical_Router":{"columns":{"name":{"type":"string"},"ports":{"type":{"key":{"type":"uuid","refTable":"Logical_Router_Port","refType":"strong"},"min":0,"max":"unlimited"}},"static_routes":{"type":{"key":{"type":"uuid","refTable":"Logical_Router_Static_Route","refType":"strong"},"min":0,"max":"unlimited"}},"policies":{"type":{"key":{"type":"uuid","refTable":"Logical_Router_Policy","refType":"strong"},"min":0,"max":"unlimited"}},"enabled":{"type":{"key":"boolean","min":0,"max":1}},"nat":{"type":{"key":{"type":"uuid","refTable":"NAT","refType":"strong"},"min":0,"max":"unlimited"}},"load_balancer":{"type":{"key":{"type":"uuid","refTable":"Load_Balancer","refType":"weak"},"min":0,"max":"unlimited"}},"load_balancer_group":{"type":{"key":{"type":"uuid","refTable":"Load_Balancer_Group"},"min":0,"max":"unlimited"}},"copp":{"type":{"key":{"type":"uuid","refTable":"Copp","refType":"weak"},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"Logical_Router_Port":{"columns":{"name":{"type":"string"},"gateway_chassis":{"type":{"key":{"type":"uuid","refTable":"Gateway_Chassis","refType":"strong"},"min":0,"max":"unlimited"}},"ha_chassis_group":{"type":{"key":{"type":"uuid","refTable":"HA_Chassis_Group","refType":"strong"},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"networks":{"type":{"key":"string","min":1,"max":"unlimited"}},"mac":{"type":"string"},"peer":{"type":{"key":"string","min":0,"max":1}},"enabled":{"type":{"key":"boolean","min":0,"max":1}},"ipv6_ra_configs":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"ipv6_prefix":{"type":{"key":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":false},"Logical_Router_Static_Route":{"columns":{"route_table":{"type":"string"},"ip_prefix":{"type":"string"},"policy":{"type":{"key":{"type":"string","enum":["set",["src-ip","dst-ip"]]},"min":0,"max":1}},"nexthop":{"type":"string"},"output_port":{"type":{"key":"string","min":0,"max":1}},"bfd":{"type":{"key":{"type":"uuid","refTable":"BFD","refType":"weak"},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"Logical_Router_Policy":{"columns":{"priority":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":32767}}},"match":{"type":"string"},"action":{"type":{"key":{"type":"string","enum":["set",["allow","drop","reroute"]]}}},"nexthop":{"type":{"key":"string","min":0,"max":1}},"nexthops":{"type":{"key":"string","min":0,"max":"unlimited"}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"NAT":{"columns":{"external_ip":{"type":"string"},"external_mac":{"type":{"key":"string","min":0,"max":1}},"external_port_range":{"type":"string"},"logical_ip":{"type":"string"},"logical_port":{"type":{"key":"string","min":0,"max":1}},"type":{"type":{"key":{"type":"string","enum":["set",["dnat","snat","dnat_and_snat"]]}}},"allowed_ext_ips":{"type":{"key":{"type":"uuid","refTable":"Address_Set","refType":"strong"},"min":0,"max":1}},"exempted_ext_ips":{"type":{"key":{"type":"uuid","refTable":"Address_Set","refType":"strong"},"min":0,"max":1}},"gateway_port":{"type":{"key":{"type":"uuid","refTable":"Logical_Router_Port","refType":"weak"},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"DHCP_Options":{"columns":{"cidr":{"type":"string"},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"Connection":{"columns":{"target":{"type":"string"},"max_backoff":{"type":{"key":{"type":"integer","minInteger":1000},"min":0,"max":1}},"inactivity_probe":{"type":{"key":"integer","min":0,"max":1}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"is_connected":{"type":"boolean","ephemeral":true},"status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true}},"indexes":[["target"]]},"DNS":{"columns":{"records":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"SSL":{"columns":{"private_key":{"type":"string"},"certificate":{"type":"string"},"ca_cert":{"type":"string"},"bootstrap_ca_cert":{"type":"boolean"},"ssl_protocols":{"type":"string"},"ssl_ciphers":{"type":"string"},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"maxRows":1},"Gateway_Chassis":{"columns":{"name":{"type":"string"},"chassis_name":{"type":"string"},"priority":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":32767}}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":false},"HA_Chassis":{"columns":{"chassis_name":{"type":"string"},"priority":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":32767}}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"HA_Chassis_Group":{"columns":{"name":{"type":"string"},"ha_chassis":{"type":{"key":{"type":"uuid","refTable":"HA_Chassis","refType":"strong"},"min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"BFD":{"columns":{"logical_port":{"type":"string"},"dst_ip":{"type":"string"},"min_tx":{"type":{"key":{"type":"integer","minInteger":1},"min":0,"max":1}},"min_rx":{"type":{"key":{"type":"integer"},"min":0,"max":1}},"detect_mult":{"type":{"key":{"type":"integer","minInteger":1},"min":0,"max":1}},"status":{"type":{"key":{"type":"string","enum":["set",["down","init","up","admin_down"]]},"min":0,"max":1}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["logical_port","dst_ip"]],"isRoot":true},"Static_MAC_Binding":{"columns":{"logical_port":{"type":"string"},"ip":{"type":"string"},"mac":{"type":"string"},"override_dynamic_mac":{"type":"boolean"}},"indexes":[["logical_port","ip"]],"isRoot":true},"Chassis_Template_Var":{"columns":{"chassis":{"type":"string"},"variables":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["chassis"]],"isRoot":true}}};

export const nbModel = defineModel<NbTables>(nbSchemaJson);
