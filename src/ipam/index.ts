// Public API of the IPAM library: pure functions and in-memory allocators, no I/O.
export {
  compareIp,
  type Family,
  familyName,
  formatIp,
  type IpAddress,
  ipEquals,
  parseIp,
  toIp,
  tryParseIp,
} from "./address.ts";
export {
  type AddressList,
  type Allocation,
  type AllocationFailure,
  type AllocationResult,
  type FailureCode,
  type HeldAddress,
  type HolderProblem,
  type ReleaseResult,
  type Reservation,
  SubnetAllocator,
} from "./allocator.ts";
export { type Capacity, displayCount, type FamilyCapacity } from "./capacity.ts";
export {
  broadcastAddress,
  type Cidr,
  cidrContains,
  cidrContainsCidr,
  cidrLast,
  cidrSize,
  formatCidr,
  networkAddress,
  overlaps,
  parseCidr,
} from "./cidr.ts";
export {
  collectHoldings,
  describeForeignHolder,
  type ForeignHolder,
  type HoldingProblem,
  HoldingSet,
  type HoldingSource,
  readSwitchPort,
} from "./foreign-holdings.ts";
export { describeHolder, type Holder } from "./holder.ts";
export { formatLspAddress, type LspAddress, parseLspAddress, portIps } from "./lsp-addresses.ts";
export {
  macForAddresses,
  macFromIPv4,
  parseMac,
  parseRequestedMac,
  type RandomBytes,
  randomLocalMac,
} from "./mac.ts";
export { type FieldProblem, formatProblem, InvalidInputError } from "./problem.ts";
export { formatRange, type IpRange, mergeRanges, parseRange, rangeContains, rangeSize } from "./range.ts";
export {
  type ExcludedRange,
  type Protocol,
  parseSubnetSpec,
  type SubnetDefinition,
  type SubnetSpecResult,
  validateSubnetSpec,
} from "./subnet-spec.ts";
