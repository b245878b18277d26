// A CniHandler that records requests and answers from a script: it stands in for the node agent's
// networking so the CNI skeleton, the socket and the shim can be tested on their own.

import { CniError, CniErrorCode } from "../../../src/cni/error.ts";
import type {
  AddRequest,
  CheckRequest,
  CniHandler,
  CniRequest,
  DelRequest,
  GcRequest,
  StatusRequest,
} from "../../../src/cni/handler.ts";
import type { CniResult } from "../../../src/cni/result.ts";

export const FAKE_POD_CIDR = "10.244.7.5/24";

type Command = CniRequest["command"];

export class FakeHandler implements CniHandler {
  readonly calls: CniRequest[] = [];
  /** Thrown by the next call of that command, then forgotten. */
  readonly failNext: Partial<Record<Command, unknown>> = {};
  /** When set, ADD waits until its signal aborts, then throws the abort reason. */
  hangAdd = false;
  /** Resolved when a hanging ADD has started, so a test knows the agent is inside the handler. */
  addStarted: Promise<void> = Promise.resolve();
  private markAddStarted: () => void = () => {};

  constructor() {
    this.armAddStarted();
  }

  armAddStarted(): void {
    this.addStarted = new Promise((resolve) => {
      this.markAddStarted = resolve;
    });
  }

  private enter(req: CniRequest): void {
    this.calls.push(req);
    const err = this.failNext[req.command];
    if (err !== undefined) {
      delete this.failNext[req.command];
      throw err;
    }
  }

  async add(req: AddRequest): Promise<CniResult> {
    this.enter(req);
    this.markAddStarted();
    if (this.hangAdd) {
      await new Promise<void>((_, reject) => {
        req.signal.addEventListener("abort", () => reject(req.signal.reason), { once: true });
      });
    }
    return {
      interfaces: [
        { name: `${req.containerId.slice(0, 12)}_h`, mac: "0a:58:0a:f4:07:01" },
        { name: req.ifname, mac: "0a:58:0a:f4:07:05", mtu: req.config.mtu ?? 1400, sandbox: req.netns },
      ],
      ips: [{ address: FAKE_POD_CIDR, gateway: "10.244.7.1", interface: 1 }],
      routes: [{ dst: "0.0.0.0/0", gw: "10.244.7.1" }],
    };
  }

  async check(req: CheckRequest): Promise<void> {
    this.enter(req);
    if (!req.prevResult?.ips?.some((ip) => ip.address === FAKE_POD_CIDR))
      throw new CniError(CniErrorCode.CheckFailed, `prevResult does not hold ${FAKE_POD_CIDR}`);
  }

  async del(req: DelRequest): Promise<void> {
    this.enter(req);
  }

  async gc(req: GcRequest): Promise<void> {
    this.enter(req);
  }

  async status(req: StatusRequest): Promise<void> {
    this.enter(req);
  }
}
