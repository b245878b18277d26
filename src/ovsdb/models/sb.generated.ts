// GENERATED FILE, DO NOT EDIT. Regenerate with `node --import tsx tools/gen-models.ts` (make models).
// Source: /usr/share/ovn/ovn-sb.ovsschema, schema OVN_Southbound version 20.27.0, cksum 4078371916 30328.
//
// One interface per table describes a row as the cache holds it; property names are the column names.
// Column kinds: scalar -> the atom, optional -> atom | null, set -> readonly array, map -> readonly object keyed
// by the key atom as a string. Enumerations are literal unions. uuid columns have type Uuid (a string whose
// phantom brand lets InsertRow/UpdateRow see them), so `XxxInsert` = InsertRow<Xxx> accepts a NamedUuid wherever
// the column, a set element or a map value is a uuid.

import { type InsertRow, type Uuid, defineModel } from "../model.ts";

/** Address_Set: root table; indexes: (name). */
export interface AddressSet {
  readonly _uuid: Uuid;
  readonly addresses: readonly string[];
  readonly name: string;
}
export type AddressSetInsert = InsertRow<AddressSet>;

/** BFD: root table; indexes: (logical_port, dst_ip, src_port, disc). */
export interface BFD {
  readonly _uuid: Uuid;
  /** integer */
  readonly detect_mult: number;
  /** integer */
  readonly disc: number;
  readonly dst_ip: string;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly logical_port: string;
  /** integer */
  readonly min_rx: number;
  /** integer */
  readonly min_tx: number;
  readonly options: Readonly<Record<string, string>>;
  /** integer 49152..65535 */
  readonly src_port: number;
  readonly status: "down" | "init" | "up" | "admin_down";
}
export type BFDInsert = InsertRow<BFD>;

/** Chassis: root table; indexes: (name). */
export interface Chassis {
  readonly _uuid: Uuid;
  /** strong ref to Encap; 1.. elements */
  readonly encaps: readonly Uuid[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly hostname: string;
  readonly name: string;
  /** integer */
  readonly nb_cfg: number;
  readonly other_config: Readonly<Record<string, string>>;
  readonly transport_zones: readonly string[];
  readonly vtep_logical_switches: readonly string[];
}
export type ChassisInsert = InsertRow<Chassis>;

/** Chassis_Private: root table; indexes: (name). */
export interface ChassisPrivate {
  readonly _uuid: Uuid;
  /** weak ref to Chassis */
  readonly chassis: Uuid | null;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly name: string;
  /** integer */
  readonly nb_cfg: number;
  /** integer */
  readonly nb_cfg_timestamp: number;
}
export type ChassisPrivateInsert = InsertRow<ChassisPrivate>;

/** Chassis_Template_Var: root table; indexes: (chassis). */
export interface ChassisTemplateVar {
  readonly _uuid: Uuid;
  readonly chassis: string;
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
  readonly read_only: boolean;
  readonly role: string;
  /** ephemeral */
  readonly status: Readonly<Record<string, string>>;
  readonly target: string;
}
export type ConnectionInsert = InsertRow<Connection>;

/** Controller_Event: root table. */
export interface ControllerEvent {
  readonly _uuid: Uuid;
  /** weak ref to Chassis */
  readonly chassis: Uuid | null;
  readonly event_info: Readonly<Record<string, string>>;
  readonly event_type: "empty_lb_backends";
  /** integer */
  readonly seq_num: number;
}
export type ControllerEventInsert = InsertRow<ControllerEvent>;

/** DHCP_Options: root table. */
export interface DHCPOptions {
  readonly _uuid: Uuid;
  /** integer 0..254 */
  readonly code: number;
  readonly name: string;
  readonly type: "bool" | "uint8" | "uint16" | "uint32" | "ipv4" | "static_routes" | "str" | "host_id" | "domains";
}
export type DHCPOptionsInsert = InsertRow<DHCPOptions>;

/** DHCPv6_Options: root table. */
export interface DHCPv6Options {
  readonly _uuid: Uuid;
  /** integer 0..254 */
  readonly code: number;
  readonly name: string;
  readonly type: "ipv6" | "str" | "mac";
}
export type DHCPv6OptionsInsert = InsertRow<DHCPv6Options>;

/** DNS: root table. */
export interface DNS {
  readonly _uuid: Uuid;
  /** strong ref to Datapath_Binding; 1.. elements */
  readonly datapaths: readonly Uuid[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly records: Readonly<Record<string, string>>;
}
export type DNSInsert = InsertRow<DNS>;

/** Datapath_Binding: root table; indexes: (tunnel_key). */
export interface DatapathBinding {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly load_balancers: readonly Uuid[];
  /** integer 1..16777215 */
  readonly tunnel_key: number;
}
export type DatapathBindingInsert = InsertRow<DatapathBinding>;

/** Encap: non-root table (rows without a strong reference are deleted); indexes: (type, ip). */
export interface Encap {
  readonly _uuid: Uuid;
  readonly chassis_name: string;
  readonly ip: string;
  readonly options: Readonly<Record<string, string>>;
  readonly type: "geneve" | "stt" | "vxlan";
}
export type EncapInsert = InsertRow<Encap>;

/** FDB: root table; indexes: (mac, dp_key). */
export interface FDB {
  readonly _uuid: Uuid;
  /** integer 1..16777215 */
  readonly dp_key: number;
  readonly mac: string;
  /** integer 1..16777215 */
  readonly port_key: number;
}
export type FDBInsert = InsertRow<FDB>;

/** Gateway_Chassis: non-root table (rows without a strong reference are deleted); indexes: (name). */
export interface GatewayChassis {
  readonly _uuid: Uuid;
  /** weak ref to Chassis */
  readonly chassis: Uuid | null;
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
  /** weak ref to Chassis */
  readonly chassis: Uuid | null;
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
  /** weak ref to Chassis */
  readonly ref_chassis: readonly Uuid[];
}
export type HAChassisGroupInsert = InsertRow<HAChassisGroup>;

/** IGMP_Group: root table; indexes: (address, datapath, chassis). */
export interface IGMPGroup {
  readonly _uuid: Uuid;
  readonly address: string;
  /** weak ref to Chassis */
  readonly chassis: Uuid | null;
  /** weak ref to Datapath_Binding */
  readonly datapath: Uuid | null;
  /** weak ref to Port_Binding */
  readonly ports: readonly Uuid[];
}
export type IGMPGroupInsert = InsertRow<IGMPGroup>;

/** IP_Multicast: root table; indexes: (datapath). */
export interface IPMulticast {
  readonly _uuid: Uuid;
  /** weak ref to Datapath_Binding */
  readonly datapath: Uuid;
  readonly enabled: boolean | null;
  readonly eth_src: string;
  /** integer */
  readonly idle_timeout: number | null;
  readonly ip4_src: string;
  readonly ip6_src: string;
  readonly querier: boolean | null;
  /** integer */
  readonly query_interval: number | null;
  /** integer */
  readonly query_max_resp: number | null;
  /** integer */
  readonly seq_no: number;
  /** integer */
  readonly table_size: number | null;
}
export type IPMulticastInsert = InsertRow<IPMulticast>;

/** Load_Balancer: root table. */
export interface LoadBalancer {
  readonly _uuid: Uuid;
  /** strong ref to Logical_DP_Group */
  readonly datapath_group: Uuid | null;
  /** strong ref to Datapath_Binding */
  readonly datapaths: readonly Uuid[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly name: string;
  readonly options: Readonly<Record<string, string>>;
  readonly protocol: "tcp" | "udp" | "sctp" | null;
  readonly vips: Readonly<Record<string, string>>;
}
export type LoadBalancerInsert = InsertRow<LoadBalancer>;

/** Logical_DP_Group: non-root table (rows without a strong reference are deleted). */
export interface LogicalDPGroup {
  readonly _uuid: Uuid;
  /** weak ref to Datapath_Binding */
  readonly datapaths: readonly Uuid[];
}
export type LogicalDPGroupInsert = InsertRow<LogicalDPGroup>;

/** Logical_Flow: root table. */
export interface LogicalFlow {
  readonly _uuid: Uuid;
  readonly actions: string;
  readonly controller_meter: string | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** strong ref to Datapath_Binding */
  readonly logical_datapath: Uuid | null;
  /** strong ref to Logical_DP_Group */
  readonly logical_dp_group: Uuid | null;
  readonly match: string;
  readonly pipeline: "ingress" | "egress";
  /** integer 0..65535 */
  readonly priority: number;
  /** integer 0..32 */
  readonly table_id: number;
  readonly tags: Readonly<Record<string, string>>;
}
export type LogicalFlowInsert = InsertRow<LogicalFlow>;

/** MAC_Binding: root table; indexes: (logical_port, ip). */
export interface MACBinding {
  readonly _uuid: Uuid;
  /** strong ref to Datapath_Binding */
  readonly datapath: Uuid;
  readonly ip: string;
  readonly logical_port: string;
  readonly mac: string;
  /** integer */
  readonly timestamp: number;
}
export type MACBindingInsert = InsertRow<MACBinding>;

/** Meter: root table; indexes: (name). */
export interface Meter {
  readonly _uuid: Uuid;
  /** strong ref to Meter_Band; 1.. elements */
  readonly bands: readonly Uuid[];
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

/** Multicast_Group: root table; indexes: (datapath, tunnel_key), (datapath, name). */
export interface MulticastGroup {
  readonly _uuid: Uuid;
  /** strong ref to Datapath_Binding */
  readonly datapath: Uuid;
  readonly name: string;
  /** weak ref to Port_Binding */
  readonly ports: readonly Uuid[];
  /** integer 32768..65535 */
  readonly tunnel_key: number;
}
export type MulticastGroupInsert = InsertRow<MulticastGroup>;

/** Port_Binding: root table; indexes: (datapath, tunnel_key), (logical_port). */
export interface PortBinding {
  readonly _uuid: Uuid;
  /** weak ref to Chassis */
  readonly additional_chassis: readonly Uuid[];
  /** weak ref to Encap */
  readonly additional_encap: readonly Uuid[];
  /** weak ref to Chassis */
  readonly chassis: Uuid | null;
  /** strong ref to Datapath_Binding */
  readonly datapath: Uuid;
  /** weak ref to Encap */
  readonly encap: Uuid | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** strong ref to Gateway_Chassis */
  readonly gateway_chassis: readonly Uuid[];
  /** strong ref to HA_Chassis_Group */
  readonly ha_chassis_group: Uuid | null;
  readonly logical_port: string;
  readonly mac: readonly string[];
  /** weak ref to Mirror */
  readonly mirror_rules: readonly Uuid[];
  readonly nat_addresses: readonly string[];
  readonly options: Readonly<Record<string, string>>;
  readonly parent_port: string | null;
  readonly port_security: readonly string[];
  /** weak ref to Chassis */
  readonly requested_additional_chassis: readonly Uuid[];
  /** weak ref to Chassis */
  readonly requested_chassis: Uuid | null;
  /** integer 1..4095 */
  readonly tag: number | null;
  /** integer 1..32767 */
  readonly tunnel_key: number;
  readonly type: string;
  readonly up: boolean | null;
  readonly virtual_parent: string | null;
}
export type PortBindingInsert = InsertRow<PortBinding>;

/** Port_Group: root table; indexes: (name). */
export interface PortGroup {
  readonly _uuid: Uuid;
  readonly name: string;
  readonly ports: readonly string[];
}
export type PortGroupInsert = InsertRow<PortGroup>;

/** RBAC_Permission: root table. */
export interface RBACPermission {
  readonly _uuid: Uuid;
  readonly authorization: readonly string[];
  readonly insert_delete: boolean;
  readonly table: string;
  readonly update: readonly string[];
}
export type RBACPermissionInsert = InsertRow<RBACPermission>;

/** RBAC_Role: root table. */
export interface RBACRole {
  readonly _uuid: Uuid;
  readonly name: string;
  /** value weak ref to RBAC_Permission */
  readonly permissions: Readonly<Record<string, Uuid>>;
}
export type RBACRoleInsert = InsertRow<RBACRole>;

/** SB_Global: root table; at most 1 rows. */
export interface SBGlobal {
  readonly _uuid: Uuid;
  /** strong ref to Connection */
  readonly connections: readonly Uuid[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly ipsec: boolean;
  /** integer */
  readonly nb_cfg: number;
  readonly options: Readonly<Record<string, string>>;
  /** strong ref to SSL */
  readonly ssl: Uuid | null;
}
export type SBGlobalInsert = InsertRow<SBGlobal>;

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

/** Service_Monitor: root table; indexes: (logical_port, ip, port, protocol). */
export interface ServiceMonitor {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly ip: string;
  readonly logical_port: string;
  readonly options: Readonly<Record<string, string>>;
  /** integer 0..65535 */
  readonly port: number;
  readonly protocol: "tcp" | "udp" | null;
  readonly src_ip: string;
  readonly src_mac: string;
  readonly status: "online" | "offline" | "error" | null;
}
export type ServiceMonitorInsert = InsertRow<ServiceMonitor>;

/** Static_MAC_Binding: root table; indexes: (logical_port, ip). */
export interface StaticMACBinding {
  readonly _uuid: Uuid;
  /** strong ref to Datapath_Binding */
  readonly datapath: Uuid;
  readonly ip: string;
  readonly logical_port: string;
  readonly mac: string;
  readonly override_dynamic_mac: boolean;
}
export type StaticMACBindingInsert = InsertRow<StaticMACBinding>;

export type SbTables = {
  Address_Set: AddressSet;
  BFD: BFD;
  Chassis: Chassis;
  Chassis_Private: ChassisPrivate;
  Chassis_Template_Var: ChassisTemplateVar;
  Connection: Connection;
  Controller_Event: ControllerEvent;
  DHCP_Options: DHCPOptions;
  DHCPv6_Options: DHCPv6Options;
  DNS: DNS;
  Datapath_Binding: DatapathBinding;
  Encap: Encap;
  FDB: FDB;
  Gateway_Chassis: GatewayChassis;
  HA_Chassis: HAChassis;
  HA_Chassis_Group: HAChassisGroup;
  IGMP_Group: IGMPGroup;
  IP_Multicast: IPMulticast;
  Load_Balancer: LoadBalancer;
  Logical_DP_Group: LogicalDPGroup;
  Logical_Flow: LogicalFlow;
  MAC_Binding: MACBinding;
  Meter: Meter;
  Meter_Band: MeterBand;
  Mirror: Mirror;
  Multicast_Group: MulticastGroup;
  Port_Binding: PortBinding;
  Port_Group: PortGroup;
  RBAC_Permission: RBACPermission;
  RBAC_Role: RBACRole;
  SB_Global: SBGlobal;
  SSL: SSL;
  Service_Monitor: ServiceMonitor;
  Static_MAC_Binding: StaticMACBinding;
};

export const sbSchemaJson: unknown = {"name":"OVN_Southbound","version":"20.27.0","cksum":"4078371916 30328","tables":{"SB_Global":{"columns":{"nb_cfg":{"type":{"key":"integer"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"connections":{"type":{"key":{"type":"uuid","refTable":"Connection"},"min":0,"max":"unlimited"}},"ssl":{"type":{"key":{"type":"uuid","refTable":"SSL"},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"ipsec":{"type":"boolean"}},"maxRows":1,"isRoot":true},"Chassis":{"columns":{"name":{"type":"string"},"hostname":{"type":"string"},"encaps":{"type":{"key":{"type":"uuid","refTable":"Encap"},"min":1,"max":"unlimited"}},"vtep_logical_switches":{"type":{"key":"string","min":0,"max":"unlimited"}},"nb_cfg":{"type":{"key":"integer"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"transport_zones":{"type":{"key":"string","min":0,"max":"unlimited"}}},"isRoot":true,"indexes":[["name"]]},"Chassis_Private":{"columns":{"name":{"type":"string"},"chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":1}},"nb_cfg":{"type":{"key":"integer"}},"nb_cfg_timestamp":{"type":{"key":"integer"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true,"indexes":[["name"]]},"Encap":{"columns":{"type":{"type":{"key":{"type":"string","enum":["set",["geneve","stt","vxlan"]]}}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"ip":{"type":"string"},"chassis_name":{"type":"string"}},"indexes":[["type","ip"]]},"Address_Set":{"columns":{"name":{"type":"string"},"addresses":{"type":{"key":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Port_Group":{"columns":{"name":{"type":"string"},"ports":{"type":{"key":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Logical_Flow":{"columns":{"logical_datapath":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding"},"min":0,"max":1}},"logical_dp_group":{"type":{"key":{"type":"uuid","refTable":"Logical_DP_Group"},"min":0,"max":1}},"pipeline":{"type":{"key":{"type":"string","enum":["set",["ingress","egress"]]}}},"table_id":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":32}}},"priority":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":65535}}},"match":{"type":"string"},"actions":{"type":"string"},"tags":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"controller_meter":{"type":{"key":{"type":"string"},"min":0,"max":1}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"Logical_DP_Group":{"columns":{"datapaths":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding","refType":"weak"},"min":0,"max":"unlimited"}}},"isRoot":false},"Multicast_Group":{"columns":{"datapath":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding"}}},"name":{"type":"string"},"tunnel_key":{"type":{"key":{"type":"integer","minInteger":32768,"maxInteger":65535}}},"ports":{"type":{"key":{"type":"uuid","refTable":"Port_Binding","refType":"weak"},"min":0,"max":"unlimited"}}},"indexes":[["datapath","tunnel_key"],["datapath","name"]],"isRoot":true},"Mirror":{"columns":{"name":{"type":"string"},"filter":{"type":{"key":{"type":"string","enum":["set",["from-lport","to-lport"]]}}},"sink":{"type":"string"},"type":{"type":{"key":{"type":"string","enum":["set",["gre","erspan"]]}}},"index":{"type":"integer"},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Meter":{"columns":{"name":{"type":"string"},"unit":{"type":{"key":{"type":"string","enum":["set",["kbps","pktps"]]}}},"bands":{"type":{"key":{"type":"uuid","refTable":"Meter_Band","refType":"strong"},"min":1,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Meter_Band":{"columns":{"action":{"type":{"key":{"type":"string","enum":["set",["drop"]]}}},"rate":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":4294967295}}},"burst_size":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295}}}},"isRoot":false},"Datapath_Binding":{"columns":{"tunnel_key":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":16777215}}},"load_balancers":{"type":{"key":{"type":"uuid"},"min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["tunnel_key"]],"isRoot":true},"Port_Binding":{"columns":{"logical_port":{"type":"string"},"type":{"type":"string"},"gateway_chassis":{"type":{"key":{"type":"uuid","refTable":"Gateway_Chassis","refType":"strong"},"min":0,"max":"unlimited"}},"ha_chassis_group":{"type":{"key":{"type":"uuid","refTable":"HA_Chassis_Group","refType":"strong"},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"datapath":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding"}}},"tunnel_key":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":32767}}},"parent_port":{"type":{"key":"string","min":0,"max":1}},"tag":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":4095},"min":0,"max":1}},"virtual_parent":{"type":{"key":"string","min":0,"max":1}},"chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":1}},"additional_chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":"unlimited"}},"encap":{"type":{"key":{"type":"uuid","refTable":"Encap","refType":"weak"},"min":0,"max":1}},"additional_encap":{"type":{"key":{"type":"uuid","refTable":"Encap","refType":"weak"},"min":0,"max":"unlimited"}},"mirror_rules":{"type":{"key":{"type":"uuid","refTable":"Mirror","refType":"weak"},"min":0,"max":"unlimited"}},"mac":{"type":{"key":"string","min":0,"max":"unlimited"}},"port_security":{"type":{"key":"string","min":0,"max":"unlimited"}},"nat_addresses":{"type":{"key":"string","min":0,"max":"unlimited"}},"up":{"type":{"key":"boolean","min":0,"max":1}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"requested_chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":1}},"requested_additional_chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":"unlimited"}}},"indexes":[["datapath","tunnel_key"],["logical_port"]],"isRoot":true},"MAC_Binding":{"columns":{"logical_port":{"type":"string"},"ip":{"type":"string"},"mac":{"type":"string"},"timestamp":{"type":{"key":"integer"}},"datapath":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding"}}}},"indexes":[["logical_port","ip"]],"isRoot":true},"DHCP_Options":{"columns":{"name":{"type":"string"},"code":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":254}}},"type":{"type":{"key":{"type":"string","enum":["set",["bool","uint8","uint16","uint32","ipv4","static_routes","str","host_id","domains"]]}}}},"isRoot":true},"DHCPv6_Options":{"columns":{"name":{"type":"string"},"code":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":254}}},"type":{"type":{"key":{"type":"string","enum":["set",["ipv6","str","mac"]]}}}},"isRoot":true},"Connection":{"columns":{"target":{"type":"string"},"max_backoff":{"type":{"key":{"type":"integer","minInteger":1000},"min":0,"max":1}},"inactivity_probe":{"type":{"key":"integer","min":0,"max":1}},"read_only":{"type":"boolean"},"role":{"type":"string"},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"is_connected":{"type":"boolean","ephemeral":true},"status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true}},"indexes":[["target"]]},"SSL":{"columns":{"private_key":{"type":"string"},"certificate":{"type":"string"},"ca_cert":{"type":"string"},"bootstrap_ca_cert":{"type":"boolean"},"ssl_protocols":{"type":"string"},"ssl_ciphers":{"type":"string"},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"maxRows":1},"DNS":{"columns":{"records":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"datapaths":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding"},"min":1,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"RBAC_Role":{"columns":{"name":{"type":"string"},"permissions":{"type":{"key":{"type":"string"},"value":{"type":"uuid","refTable":"RBAC_Permission","refType":"weak"},"min":0,"max":"unlimited"}}},"isRoot":true},"RBAC_Permission":{"columns":{"table":{"type":"string"},"authorization":{"type":{"key":"string","min":0,"max":"unlimited"}},"insert_delete":{"type":"boolean"},"update":{"type":{"key":"string","min":0,"max":"unlimited"}}},"isRoot":true},"Gateway_Chassis":{"columns":{"name":{"type":"string"},"chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":1}},"priority":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":32767}}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":false},"HA_Chassis":{"columns":{"chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":1}},"priority":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":32767}}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":false},"HA_Chassis_Group":{"columns":{"name":{"type":"string"},"ha_chassis":{"type":{"key":{"type":"uuid","refTable":"HA_Chassis","refType":"strong"},"min":0,"max":"unlimited"}},"ref_chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]],"isRoot":true},"Controller_Event":{"columns":{"event_type":{"type":{"key":{"type":"string","enum":["set",["empty_lb_backends"]]}}},"event_info":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":1}},"seq_num":{"type":{"key":"integer"}}},"isRoot":true},"IP_Multicast":{"columns":{"datapath":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding","refType":"weak"}}},"enabled":{"type":{"key":"boolean","min":0,"max":1}},"querier":{"type":{"key":"boolean","min":0,"max":1}},"eth_src":{"type":"string"},"ip4_src":{"type":"string"},"ip6_src":{"type":"string"},"table_size":{"type":{"key":"integer","min":0,"max":1}},"idle_timeout":{"type":{"key":"integer","min":0,"max":1}},"query_interval":{"type":{"key":"integer","min":0,"max":1}},"query_max_resp":{"type":{"key":"integer","min":0,"max":1}},"seq_no":{"type":"integer"}},"indexes":[["datapath"]],"isRoot":true},"IGMP_Group":{"columns":{"address":{"type":"string"},"datapath":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding","refType":"weak"},"min":0,"max":1}},"chassis":{"type":{"key":{"type":"uuid","refTable":"Chassis","refType":"weak"},"min":0,"max":1}},"ports":{"type":{"key":{"type":"uuid","refTable":"Port_Binding","refType":"weak"},"min":0,"max":"unlimited"}}},"indexes":[["address","datapath","chassis"]],"isRoot":true},"Service_Monitor":{"columns":{"ip":{"type":"string"},"protocol":{"type":{"key":{"type":"string","enum":["set",["tcp","udp"]]},"min":0,"max":1}},"port":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":65535}}},"logical_port":{"type":"string"},"src_mac":{"type":"string"},"src_ip":{"type":"string"},"status":{"type":{"key":{"type":"string","enum":["set",["online","offline","error"]]},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["logical_port","ip","port","protocol"]],"isRoot":true},"Load_Balancer":{"columns":{"name":{"type":"string"},"vips":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"protocol":{"type":{"key":{"type":"string","enum":["set",["tcp","udp","sctp"]]},"min":0,"max":1}},"datapaths":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding"},"min":0,"max":"unlimited"}},"datapath_group":{"type":{"key":{"type":"uuid","refTable":"Logical_DP_Group"},"min":0,"max":1}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"BFD":{"columns":{"src_port":{"type":{"key":{"type":"integer","minInteger":49152,"maxInteger":65535}}},"disc":{"type":{"key":{"type":"integer"}}},"logical_port":{"type":"string"},"dst_ip":{"type":"string"},"min_tx":{"type":{"key":{"type":"integer"}}},"min_rx":{"type":{"key":{"type":"integer"}}},"detect_mult":{"type":{"key":{"type":"integer"}}},"status":{"type":{"key":{"type":"string","enum":["set",["down","init","up","admin_down"]]}}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["logical_port","dst_ip","src_port","disc"]],"isRoot":true},"FDB":{"columns":{"mac":{"type":"string"},"dp_key":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":16777215}}},"port_key":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":16777215}}}},"indexes":[["mac","dp_key"]],"isRoot":true},"Static_MAC_Binding":{"columns":{"logical_port":{"type":"string"},"ip":{"type":"string"},"mac":{"type":"string"},"override_dynamic_mac":{"type":"boolean"},"datapath":{"type":{"key":{"type":"uuid","refTable":"Datapath_Binding"}}}},"indexes":[["logical_port","ip"]],"isRoot":true},"Chassis_Template_Var":{"columns":{"chassis":{"type":"string"},"variables":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["chassis"]],"isRoot":true}}};

export const sbModel = defineModel<SbTables>(sbSchemaJson);
