// GENERATED FILE, DO NOT EDIT. Regenerate with `node --import tsx tools/gen-models.ts` (make models).
// Source: /usr/share/openvswitch/vswitch.ovsschema, schema Open_vSwitch version 8.3.1, cksum 3012963480 26720.
//
// One interface per table describes a row as the cache holds it; property names are the column names.
// Column kinds: scalar -> the atom, optional -> atom | null, set -> readonly array, map -> readonly object keyed
// by the key atom as a string. Enumerations are literal unions. uuid columns have type Uuid (a string whose
// phantom brand lets InsertRow/UpdateRow see them), so `XxxInsert` = InsertRow<Xxx> accepts a NamedUuid wherever
// the column, a set element or a map value is a uuid.

import { type InsertRow, type Uuid, defineModel } from "../model.ts";

/** AutoAttach: non-root table (rows without a strong reference are deleted). */
export interface AutoAttach {
  readonly _uuid: Uuid;
  /** key integer 0..16777215; value integer 0..4095 */
  readonly mappings: Readonly<Record<string, number>>;
  readonly system_description: string;
  readonly system_name: string;
}
export type AutoAttachInsert = InsertRow<AutoAttach>;

/** Bridge: non-root table (rows without a strong reference are deleted); indexes: (name). */
export interface Bridge {
  readonly _uuid: Uuid;
  /** strong ref to AutoAttach */
  readonly auto_attach: Uuid | null;
  /** strong ref to Controller */
  readonly controller: readonly Uuid[];
  /** ephemeral */
  readonly datapath_id: string | null;
  readonly datapath_type: string;
  readonly datapath_version: string;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly fail_mode: "standalone" | "secure" | null;
  /** integer 0..4095; 0..4096 elements */
  readonly flood_vlans: readonly number[];
  /** key integer 0..254; value strong ref to Flow_Table */
  readonly flow_tables: Readonly<Record<string, Uuid>>;
  /** strong ref to IPFIX */
  readonly ipfix: Uuid | null;
  readonly mcast_snooping_enable: boolean;
  /** strong ref to Mirror */
  readonly mirrors: readonly Uuid[];
  /** immutable */
  readonly name: string;
  /** strong ref to NetFlow */
  readonly netflow: Uuid | null;
  readonly other_config: Readonly<Record<string, string>>;
  /** strong ref to Port */
  readonly ports: readonly Uuid[];
  readonly protocols: readonly ("OpenFlow10" | "OpenFlow11" | "OpenFlow12" | "OpenFlow13" | "OpenFlow14" | "OpenFlow15")[];
  readonly rstp_enable: boolean;
  /** ephemeral */
  readonly rstp_status: Readonly<Record<string, string>>;
  /** strong ref to sFlow */
  readonly sflow: Uuid | null;
  /** ephemeral */
  readonly status: Readonly<Record<string, string>>;
  readonly stp_enable: boolean;
}
export type BridgeInsert = InsertRow<Bridge>;

/** CT_Timeout_Policy: non-root table (rows without a strong reference are deleted). */
export interface CTTimeoutPolicy {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  /** value integer 0..4294967295 */
  readonly timeouts: Readonly<Partial<Record<"tcp_syn_sent" | "tcp_syn_recv" | "tcp_established" | "tcp_fin_wait" | "tcp_close_wait" | "tcp_last_ack" | "tcp_time_wait" | "tcp_close" | "tcp_syn_sent2" | "tcp_retransmit" | "tcp_unack" | "udp_first" | "udp_single" | "udp_multiple" | "icmp_first" | "icmp_reply", number>>>;
}
export type CTTimeoutPolicyInsert = InsertRow<CTTimeoutPolicy>;

/** CT_Zone: non-root table (rows without a strong reference are deleted). */
export interface CTZone {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  /** strong ref to CT_Timeout_Policy */
  readonly timeout_policy: Uuid | null;
}
export type CTZoneInsert = InsertRow<CTZone>;

/** Controller: non-root table (rows without a strong reference are deleted). */
export interface Controller {
  readonly _uuid: Uuid;
  readonly connection_mode: "in-band" | "out-of-band" | null;
  /** integer 25.. */
  readonly controller_burst_limit: number | null;
  /** integer 1..512 */
  readonly controller_queue_size: number | null;
  /** integer 100.. */
  readonly controller_rate_limit: number | null;
  readonly enable_async_messages: boolean | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer */
  readonly inactivity_probe: number | null;
  /** ephemeral */
  readonly is_connected: boolean;
  readonly local_gateway: string | null;
  readonly local_ip: string | null;
  readonly local_netmask: string | null;
  /** integer 1000.. */
  readonly max_backoff: number | null;
  readonly other_config: Readonly<Record<string, string>>;
  /** ephemeral */
  readonly role: "other" | "master" | "slave" | null;
  /** ephemeral */
  readonly status: Readonly<Record<string, string>>;
  readonly target: string;
  readonly type: "primary" | "service" | null;
}
export type ControllerInsert = InsertRow<Controller>;

/** Datapath: non-root table (rows without a strong reference are deleted). */
export interface Datapath {
  readonly _uuid: Uuid;
  readonly capabilities: Readonly<Record<string, string>>;
  /** key integer 0..65535; value strong ref to CT_Zone */
  readonly ct_zones: Readonly<Record<string, Uuid>>;
  readonly datapath_version: string;
  readonly external_ids: Readonly<Record<string, string>>;
}
export type DatapathInsert = InsertRow<Datapath>;

/** Flow_Sample_Collector_Set: root table; indexes: (id, bridge). */
export interface FlowSampleCollectorSet {
  readonly _uuid: Uuid;
  /** strong ref to Bridge */
  readonly bridge: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer 0..4294967295 */
  readonly id: number;
  /** strong ref to IPFIX */
  readonly ipfix: Uuid | null;
}
export type FlowSampleCollectorSetInsert = InsertRow<FlowSampleCollectorSet>;

/** Flow_Table: non-root table (rows without a strong reference are deleted). */
export interface FlowTable {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer 0.. */
  readonly flow_limit: number | null;
  readonly groups: readonly string[];
  readonly name: string | null;
  readonly overflow_policy: "refuse" | "evict" | null;
  /** 0..3 elements */
  readonly prefixes: readonly string[];
}
export type FlowTableInsert = InsertRow<FlowTable>;

/** IPFIX: non-root table (rows without a strong reference are deleted). */
export interface IPFIX {
  readonly _uuid: Uuid;
  /** integer 0..4200 */
  readonly cache_active_timeout: number | null;
  /** integer 0..4294967295 */
  readonly cache_max_flows: number | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer 0..4294967295 */
  readonly obs_domain_id: number | null;
  /** integer 0..4294967295 */
  readonly obs_point_id: number | null;
  readonly other_config: Readonly<Record<string, string>>;
  /** integer 1..4294967295 */
  readonly sampling: number | null;
  readonly targets: readonly string[];
}
export type IPFIXInsert = InsertRow<IPFIX>;

/** Interface: non-root table (rows without a strong reference are deleted); indexes: (name). */
export interface Interface {
  readonly _uuid: Uuid;
  /** ephemeral */
  readonly admin_state: "up" | "down" | null;
  readonly bfd: Readonly<Record<string, string>>;
  /** ephemeral */
  readonly bfd_status: Readonly<Record<string, string>>;
  /** ephemeral */
  readonly cfm_fault: boolean | null;
  /** ephemeral */
  readonly cfm_fault_status: readonly string[];
  /** integer */
  readonly cfm_flap_count: number | null;
  /** integer 0..100; ephemeral */
  readonly cfm_health: number | null;
  /** integer */
  readonly cfm_mpid: number | null;
  /** integer; ephemeral */
  readonly cfm_remote_mpids: readonly number[];
  /** ephemeral */
  readonly cfm_remote_opstate: "up" | "down" | null;
  /** ephemeral */
  readonly duplex: "half" | "full" | null;
  readonly error: string | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer 0..4294967295; ephemeral */
  readonly ifindex: number | null;
  /** integer 0.. */
  readonly ingress_policing_burst: number;
  /** integer 0.. */
  readonly ingress_policing_kpkts_burst: number;
  /** integer 0.. */
  readonly ingress_policing_kpkts_rate: number;
  /** integer 0.. */
  readonly ingress_policing_rate: number;
  /** ephemeral */
  readonly lacp_current: boolean | null;
  /** integer; ephemeral */
  readonly link_resets: number | null;
  /** integer; ephemeral */
  readonly link_speed: number | null;
  /** ephemeral */
  readonly link_state: "up" | "down" | null;
  readonly lldp: Readonly<Record<string, string>>;
  readonly mac: string | null;
  /** ephemeral */
  readonly mac_in_use: string | null;
  /** integer; ephemeral */
  readonly mtu: number | null;
  /** integer 1.. */
  readonly mtu_request: number | null;
  /** immutable */
  readonly name: string;
  /** integer */
  readonly ofport: number | null;
  /** integer 1..65279 */
  readonly ofport_request: number | null;
  readonly options: Readonly<Record<string, string>>;
  readonly other_config: Readonly<Record<string, string>>;
  /** value integer; ephemeral */
  readonly statistics: Readonly<Record<string, number>>;
  /** ephemeral */
  readonly status: Readonly<Record<string, string>>;
  readonly type: string;
}
export type InterfaceInsert = InsertRow<Interface>;

/** Manager: non-root table (rows without a strong reference are deleted); indexes: (target). */
export interface Manager {
  readonly _uuid: Uuid;
  readonly connection_mode: "in-band" | "out-of-band" | null;
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
export type ManagerInsert = InsertRow<Manager>;

/** Mirror: non-root table (rows without a strong reference are deleted). */
export interface Mirror {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly name: string;
  /** weak ref to Port */
  readonly output_port: Uuid | null;
  /** integer 1..4095 */
  readonly output_vlan: number | null;
  readonly select_all: boolean;
  /** weak ref to Port */
  readonly select_dst_port: readonly Uuid[];
  /** weak ref to Port */
  readonly select_src_port: readonly Uuid[];
  /** integer 0..4095; 0..4096 elements */
  readonly select_vlan: readonly number[];
  /** integer 14..65535 */
  readonly snaplen: number | null;
  /** value integer; ephemeral */
  readonly statistics: Readonly<Record<string, number>>;
}
export type MirrorInsert = InsertRow<Mirror>;

/** NetFlow: non-root table (rows without a strong reference are deleted). */
export interface NetFlow {
  readonly _uuid: Uuid;
  /** integer -1.. */
  readonly active_timeout: number;
  readonly add_id_to_interface: boolean;
  /** integer 0..255 */
  readonly engine_id: number | null;
  /** integer 0..255 */
  readonly engine_type: number | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** 1.. elements */
  readonly targets: readonly string[];
}
export type NetFlowInsert = InsertRow<NetFlow>;

/** Open_vSwitch: root table; at most 1 rows. */
export interface OpenVSwitch {
  readonly _uuid: Uuid;
  /** strong ref to Bridge */
  readonly bridges: readonly Uuid[];
  /** integer */
  readonly cur_cfg: number;
  readonly datapath_types: readonly string[];
  /** value strong ref to Datapath */
  readonly datapaths: Readonly<Record<string, Uuid>>;
  readonly db_version: string | null;
  readonly dpdk_initialized: boolean;
  readonly dpdk_version: string | null;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly iface_types: readonly string[];
  /** strong ref to Manager */
  readonly manager_options: readonly Uuid[];
  /** integer */
  readonly next_cfg: number;
  readonly other_config: Readonly<Record<string, string>>;
  readonly ovs_version: string | null;
  /** strong ref to SSL */
  readonly ssl: Uuid | null;
  /** ephemeral */
  readonly statistics: Readonly<Record<string, string>>;
  readonly system_type: string | null;
  readonly system_version: string | null;
}
export type OpenVSwitchInsert = InsertRow<OpenVSwitch>;

/** Port: non-root table (rows without a strong reference are deleted); indexes: (name). */
export interface Port {
  readonly _uuid: Uuid;
  readonly bond_active_slave: string | null;
  /** integer */
  readonly bond_downdelay: number;
  readonly bond_fake_iface: boolean;
  readonly bond_mode: "balance-tcp" | "balance-slb" | "active-backup" | null;
  /** integer */
  readonly bond_updelay: number;
  /** integer 0..4095; 0..4096 elements */
  readonly cvlans: readonly number[];
  readonly external_ids: Readonly<Record<string, string>>;
  readonly fake_bridge: boolean;
  /** strong ref to Interface; 1.. elements */
  readonly interfaces: readonly Uuid[];
  readonly lacp: "active" | "passive" | "off" | null;
  readonly mac: string | null;
  /** immutable */
  readonly name: string;
  readonly other_config: Readonly<Record<string, string>>;
  readonly protected: boolean;
  /** strong ref to QoS */
  readonly qos: Uuid | null;
  /** value integer; ephemeral */
  readonly rstp_statistics: Readonly<Record<string, number>>;
  /** ephemeral */
  readonly rstp_status: Readonly<Record<string, string>>;
  /** value integer; ephemeral */
  readonly statistics: Readonly<Record<string, number>>;
  /** ephemeral */
  readonly status: Readonly<Record<string, string>>;
  /** integer 0..4095 */
  readonly tag: number | null;
  /** integer 0..4095; 0..4096 elements */
  readonly trunks: readonly number[];
  readonly vlan_mode: "trunk" | "access" | "native-tagged" | "native-untagged" | "dot1q-tunnel" | null;
}
export type PortInsert = InsertRow<Port>;

/** QoS: root table. */
export interface QoS {
  readonly _uuid: Uuid;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly other_config: Readonly<Record<string, string>>;
  /** key integer 0..4294967295; value strong ref to Queue */
  readonly queues: Readonly<Record<string, Uuid>>;
  readonly type: string;
}
export type QoSInsert = InsertRow<QoS>;

/** Queue: root table. */
export interface Queue {
  readonly _uuid: Uuid;
  /** integer 0..63 */
  readonly dscp: number | null;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly other_config: Readonly<Record<string, string>>;
}
export type QueueInsert = InsertRow<Queue>;

/** SSL: non-root table (rows without a strong reference are deleted); at most 1 rows. */
export interface SSL {
  readonly _uuid: Uuid;
  readonly bootstrap_ca_cert: boolean;
  readonly ca_cert: string;
  readonly certificate: string;
  readonly external_ids: Readonly<Record<string, string>>;
  readonly private_key: string;
}
export type SSLInsert = InsertRow<SSL>;

/** sFlow: non-root table (rows without a strong reference are deleted). */
export interface SFlow {
  readonly _uuid: Uuid;
  readonly agent: string | null;
  readonly external_ids: Readonly<Record<string, string>>;
  /** integer */
  readonly header: number | null;
  /** integer */
  readonly polling: number | null;
  /** integer */
  readonly sampling: number | null;
  /** 1.. elements */
  readonly targets: readonly string[];
}
export type SFlowInsert = InsertRow<SFlow>;

export type VswitchTables = {
  AutoAttach: AutoAttach;
  Bridge: Bridge;
  CT_Timeout_Policy: CTTimeoutPolicy;
  CT_Zone: CTZone;
  Controller: Controller;
  Datapath: Datapath;
  Flow_Sample_Collector_Set: FlowSampleCollectorSet;
  Flow_Table: FlowTable;
  IPFIX: IPFIX;
  Interface: Interface;
  Manager: Manager;
  Mirror: Mirror;
  NetFlow: NetFlow;
  Open_vSwitch: OpenVSwitch;
  Port: Port;
  QoS: QoS;
  Queue: Queue;
  SSL: SSL;
  sFlow: SFlow;
};

export const vswitchSchemaJson: unknown = {"name":"Open_vSwitch","version":"8.3.1","cksum":"3012963480 26720","tables":{"Open_vSwitch":{"columns":{"datapaths":{"type":{"key":{"type":"string"},"value":{"type":"uuid","refTable":"Datapath"},"min":0,"max":"unlimited"}},"bridges":{"type":{"key":{"type":"uuid","refTable":"Bridge"},"min":0,"max":"unlimited"}},"manager_options":{"type":{"key":{"type":"uuid","refTable":"Manager"},"min":0,"max":"unlimited"}},"ssl":{"type":{"key":{"type":"uuid","refTable":"SSL"},"min":0,"max":1}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"next_cfg":{"type":"integer"},"cur_cfg":{"type":"integer"},"statistics":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true},"ovs_version":{"type":{"key":{"type":"string"},"min":0,"max":1}},"db_version":{"type":{"key":{"type":"string"},"min":0,"max":1}},"system_type":{"type":{"key":{"type":"string"},"min":0,"max":1}},"system_version":{"type":{"key":{"type":"string"},"min":0,"max":1}},"datapath_types":{"type":{"key":{"type":"string"},"min":0,"max":"unlimited"}},"iface_types":{"type":{"key":{"type":"string"},"min":0,"max":"unlimited"}},"dpdk_initialized":{"type":"boolean"},"dpdk_version":{"type":{"key":{"type":"string"},"min":0,"max":1}}},"isRoot":true,"maxRows":1},"Bridge":{"columns":{"name":{"type":"string","mutable":false},"datapath_type":{"type":"string"},"datapath_version":{"type":"string"},"datapath_id":{"type":{"key":"string","min":0,"max":1},"ephemeral":true},"stp_enable":{"type":"boolean"},"rstp_enable":{"type":"boolean"},"mcast_snooping_enable":{"type":"boolean"},"ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},"mirrors":{"type":{"key":{"type":"uuid","refTable":"Mirror"},"min":0,"max":"unlimited"}},"netflow":{"type":{"key":{"type":"uuid","refTable":"NetFlow"},"min":0,"max":1}},"sflow":{"type":{"key":{"type":"uuid","refTable":"sFlow"},"min":0,"max":1}},"ipfix":{"type":{"key":{"type":"uuid","refTable":"IPFIX"},"min":0,"max":1}},"controller":{"type":{"key":{"type":"uuid","refTable":"Controller"},"min":0,"max":"unlimited"}},"protocols":{"type":{"key":{"type":"string","enum":["set",["OpenFlow10","OpenFlow11","OpenFlow12","OpenFlow13","OpenFlow14","OpenFlow15"]]},"min":0,"max":"unlimited"}},"fail_mode":{"type":{"key":{"type":"string","enum":["set",["standalone","secure"]]},"min":0,"max":1}},"status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true},"rstp_status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"flood_vlans":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4095},"min":0,"max":4096}},"flow_tables":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":254},"value":{"type":"uuid","refTable":"Flow_Table"},"min":0,"max":"unlimited"}},"auto_attach":{"type":{"key":{"type":"uuid","refTable":"AutoAttach"},"min":0,"max":1}}},"indexes":[["name"]]},"Port":{"columns":{"name":{"type":"string","mutable":false},"interfaces":{"type":{"key":{"type":"uuid","refTable":"Interface"},"min":1,"max":"unlimited"}},"trunks":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4095},"min":0,"max":4096}},"cvlans":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4095},"min":0,"max":4096}},"tag":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4095},"min":0,"max":1}},"vlan_mode":{"type":{"key":{"type":"string","enum":["set",["trunk","access","native-tagged","native-untagged","dot1q-tunnel"]]},"min":0,"max":1}},"qos":{"type":{"key":{"type":"uuid","refTable":"QoS"},"min":0,"max":1}},"mac":{"type":{"key":{"type":"string"},"min":0,"max":1}},"bond_mode":{"type":{"key":{"type":"string","enum":["set",["balance-tcp","balance-slb","active-backup"]]},"min":0,"max":1}},"lacp":{"type":{"key":{"type":"string","enum":["set",["active","passive","off"]]},"min":0,"max":1}},"bond_updelay":{"type":"integer"},"bond_downdelay":{"type":"integer"},"bond_active_slave":{"type":{"key":{"type":"string"},"min":0,"max":1}},"bond_fake_iface":{"type":"boolean"},"fake_bridge":{"type":"boolean"},"status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true},"rstp_status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true},"rstp_statistics":{"type":{"key":"string","value":"integer","min":0,"max":"unlimited"},"ephemeral":true},"statistics":{"type":{"key":"string","value":"integer","min":0,"max":"unlimited"},"ephemeral":true},"protected":{"type":"boolean"},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"indexes":[["name"]]},"Interface":{"columns":{"name":{"type":"string","mutable":false},"type":{"type":"string"},"options":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"ingress_policing_rate":{"type":{"key":{"type":"integer","minInteger":0}}},"ingress_policing_burst":{"type":{"key":{"type":"integer","minInteger":0}}},"ingress_policing_kpkts_rate":{"type":{"key":{"type":"integer","minInteger":0}}},"ingress_policing_kpkts_burst":{"type":{"key":{"type":"integer","minInteger":0}}},"mac_in_use":{"type":{"key":{"type":"string"},"min":0,"max":1},"ephemeral":true},"mac":{"type":{"key":{"type":"string"},"min":0,"max":1}},"ifindex":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295},"min":0,"max":1},"ephemeral":true},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"ofport":{"type":{"key":"integer","min":0,"max":1}},"ofport_request":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":65279},"min":0,"max":1}},"bfd":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"bfd_status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true},"cfm_mpid":{"type":{"key":{"type":"integer"},"min":0,"max":1}},"cfm_remote_mpids":{"type":{"key":{"type":"integer"},"min":0,"max":"unlimited"},"ephemeral":true},"cfm_flap_count":{"type":{"key":{"type":"integer"},"min":0,"max":1}},"cfm_fault":{"type":{"key":{"type":"boolean"},"min":0,"max":1},"ephemeral":true},"cfm_fault_status":{"type":{"key":"string","min":0,"max":"unlimited"},"ephemeral":true},"cfm_remote_opstate":{"type":{"key":{"type":"string","enum":["set",["up","down"]]},"min":0,"max":1},"ephemeral":true},"cfm_health":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":100},"min":0,"max":1},"ephemeral":true},"lacp_current":{"type":{"key":{"type":"boolean"},"min":0,"max":1},"ephemeral":true},"lldp":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"statistics":{"type":{"key":"string","value":"integer","min":0,"max":"unlimited"},"ephemeral":true},"status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true},"admin_state":{"type":{"key":{"type":"string","enum":["set",["up","down"]]},"min":0,"max":1},"ephemeral":true},"link_state":{"type":{"key":{"type":"string","enum":["set",["up","down"]]},"min":0,"max":1},"ephemeral":true},"link_resets":{"type":{"key":{"type":"integer"},"min":0,"max":1},"ephemeral":true},"link_speed":{"type":{"key":"integer","min":0,"max":1},"ephemeral":true},"duplex":{"type":{"key":{"type":"string","enum":["set",["half","full"]]},"min":0,"max":1},"ephemeral":true},"mtu":{"type":{"key":"integer","min":0,"max":1},"ephemeral":true},"mtu_request":{"type":{"key":{"type":"integer","minInteger":1},"min":0,"max":1}},"error":{"type":{"key":"string","min":0,"max":1}}},"indexes":[["name"]]},"Flow_Table":{"columns":{"name":{"type":{"key":"string","min":0,"max":1}},"flow_limit":{"type":{"key":{"type":"integer","minInteger":0},"min":0,"max":1}},"overflow_policy":{"type":{"key":{"type":"string","enum":["set",["refuse","evict"]]},"min":0,"max":1}},"groups":{"type":{"key":"string","min":0,"max":"unlimited"}},"prefixes":{"type":{"key":"string","min":0,"max":3}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},"QoS":{"columns":{"type":{"type":"string"},"queues":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295},"value":{"type":"uuid","refTable":"Queue"},"min":0,"max":"unlimited"}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"Queue":{"columns":{"dscp":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":63},"min":0,"max":1}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true},"Mirror":{"columns":{"name":{"type":"string"},"select_all":{"type":"boolean"},"select_src_port":{"type":{"key":{"type":"uuid","refTable":"Port","refType":"weak"},"min":0,"max":"unlimited"}},"select_dst_port":{"type":{"key":{"type":"uuid","refTable":"Port","refType":"weak"},"min":0,"max":"unlimited"}},"select_vlan":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4095},"min":0,"max":4096}},"output_port":{"type":{"key":{"type":"uuid","refTable":"Port","refType":"weak"},"min":0,"max":1}},"output_vlan":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":4095},"min":0,"max":1}},"snaplen":{"type":{"key":{"type":"integer","minInteger":14,"maxInteger":65535},"min":0,"max":1}},"statistics":{"type":{"key":"string","value":"integer","min":0,"max":"unlimited"},"ephemeral":true},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},"NetFlow":{"columns":{"targets":{"type":{"key":{"type":"string"},"min":1,"max":"unlimited"}},"engine_type":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":255},"min":0,"max":1}},"engine_id":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":255},"min":0,"max":1}},"add_id_to_interface":{"type":"boolean"},"active_timeout":{"type":{"key":{"type":"integer","minInteger":-1}}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},"sFlow":{"columns":{"targets":{"type":{"key":"string","min":1,"max":"unlimited"}},"sampling":{"type":{"key":"integer","min":0,"max":1}},"polling":{"type":{"key":"integer","min":0,"max":1}},"header":{"type":{"key":"integer","min":0,"max":1}},"agent":{"type":{"key":"string","min":0,"max":1}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},"IPFIX":{"columns":{"targets":{"type":{"key":"string","min":0,"max":"unlimited"}},"sampling":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":4294967295},"min":0,"max":1}},"obs_domain_id":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295},"min":0,"max":1}},"obs_point_id":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295},"min":0,"max":1}},"cache_active_timeout":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4200},"min":0,"max":1}},"cache_max_flows":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295},"min":0,"max":1}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},"Flow_Sample_Collector_Set":{"columns":{"id":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":4294967295},"min":1,"max":1}},"bridge":{"type":{"key":{"type":"uuid","refTable":"Bridge"},"min":1,"max":1}},"ipfix":{"type":{"key":{"type":"uuid","refTable":"IPFIX"},"min":0,"max":1}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"isRoot":true,"indexes":[["id","bridge"]]},"Controller":{"columns":{"type":{"type":{"key":{"type":"string","enum":["set",["primary","service"]]},"min":0,"max":1}},"target":{"type":"string"},"max_backoff":{"type":{"key":{"type":"integer","minInteger":1000},"min":0,"max":1}},"inactivity_probe":{"type":{"key":"integer","min":0,"max":1}},"connection_mode":{"type":{"key":{"type":"string","enum":["set",["in-band","out-of-band"]]},"min":0,"max":1}},"local_ip":{"type":{"key":{"type":"string"},"min":0,"max":1}},"local_netmask":{"type":{"key":{"type":"string"},"min":0,"max":1}},"local_gateway":{"type":{"key":{"type":"string"},"min":0,"max":1}},"enable_async_messages":{"type":{"key":{"type":"boolean"},"min":0,"max":1}},"controller_queue_size":{"type":{"key":{"type":"integer","minInteger":1,"maxInteger":512},"min":0,"max":1}},"controller_rate_limit":{"type":{"key":{"type":"integer","minInteger":100},"min":0,"max":1}},"controller_burst_limit":{"type":{"key":{"type":"integer","minInteger":25},"min":0,"max":1}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"is_connected":{"type":"boolean","ephemeral":true},"role":{"type":{"key":{"type":"string","enum":["set",["other","master","slave"]]},"min":0,"max":1},"ephemeral":true},"status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true}}},"Manager":{"columns":{"target":{"type":"string"},"max_backoff":{"type":{"key":{"type":"integer","minInteger":1000},"min":0,"max":1}},"inactivity_probe":{"type":{"key":"integer","min":0,"max":1}},"connection_mode":{"type":{"key":{"type":"string","enum":["set",["in-band","out-of-band"]]},"min":0,"max":1}},"other_config":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"is_connected":{"type":"boolean","ephemeral":true},"status":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"},"ephemeral":true}},"indexes":[["target"]]},"Datapath":{"columns":{"datapath_version":{"type":"string"},"ct_zones":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":65535},"value":{"type":"uuid","refTable":"CT_Zone"},"min":0,"max":"unlimited"}},"capabilities":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},"CT_Zone":{"columns":{"timeout_policy":{"type":{"key":{"type":"uuid","refTable":"CT_Timeout_Policy"},"min":0,"max":1}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},"CT_Timeout_Policy":{"columns":{"timeouts":{"type":{"key":{"type":"string","enum":["set",["tcp_syn_sent","tcp_syn_recv","tcp_established","tcp_fin_wait","tcp_close_wait","tcp_last_ack","tcp_time_wait","tcp_close","tcp_syn_sent2","tcp_retransmit","tcp_unack","udp_first","udp_single","udp_multiple","icmp_first","icmp_reply"]]},"value":{"type":"integer","minInteger":0,"maxInteger":4294967295},"min":0,"max":"unlimited"}},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},"SSL":{"columns":{"private_key":{"type":"string"},"certificate":{"type":"string"},"ca_cert":{"type":"string"},"bootstrap_ca_cert":{"type":"boolean"},"external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}},"maxRows":1},"AutoAttach":{"columns":{"system_name":{"type":"string"},"system_description":{"type":"string"},"mappings":{"type":{"key":{"type":"integer","minInteger":0,"maxInteger":16777215},"value":{"type":"integer","minInteger":0,"maxInteger":4095},"min":0,"max":"unlimited"}}}}}};

export const vswitchModel = defineModel<VswitchTables>(vswitchSchemaJson);
