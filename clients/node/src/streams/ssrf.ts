/**
 * Where a webhook may be sent (PROTOCOL.md §6.2, §12.8), checked again at
 * delivery time (the database checked the URL text when the subscription was
 * made): https only, except the development hosts `localhost` and 127.x.x.x
 * over http; every address the host resolves to must be public. Private
 * (RFC 1918, CGNAT), loopback, link-local (with the 169.254.169.254 metadata
 * endpoint), unique-local, multicast and reserved addresses are refused, also
 * when IPv4 hides inside IPv6 (mapped, compatible, NAT64). The check runs in
 * the connection's own lookup, so the address connected to is the address
 * checked (no window for DNS rebinding).
 */
import dns from 'node:dns'
import net from 'node:net'

/** A dns.lookup-compatible resolver (called with `all: true`). */
export type LookupFunction = typeof dns.lookup

/** A webhook target refused by the rules above; the delivery counts as failed. */
export class WebhookRefusedError extends Error {
  override name = 'WebhookRefusedError'
}

const BLOCKED = new net.BlockList()
for (const [prefix, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) BLOCKED.addSubnet(prefix, bits, 'ipv4')
for (const [prefix, bits] of [
  ['::', 128], ['::1', 128], ['fe80::', 10], ['fec0::', 10], ['fc00::', 7], ['ff00::', 8], ['2001:db8::', 32],
] as const) BLOCKED.addSubnet(prefix, bits, 'ipv6')

/** Whether an IP address literal is one a webhook must not reach. */
export function isBlockedAddress(address: string): boolean {
  const family = net.isIP(address)
  if (family === 4) return BLOCKED.check(address, 'ipv4')
  if (family !== 6) return true
  const embedded = embeddedIpv4(address)
  if (embedded !== undefined) return BLOCKED.check(embedded, 'ipv4')
  return BLOCKED.check(address, 'ipv6')
}

/** The IPv4 address inside a mapped (::ffff:0:0/96), compatible (::/96) or NAT64 (64:ff9b::/96) IPv6 address. */
function embeddedIpv4(address: string): string | undefined {
  const h = expandIpv6(address)
  if (h === undefined) return undefined
  const zero = (from: number, to: number) => h.slice(from, to).every((x) => x === 0)
  const mapped = zero(0, 5) && h[5] === 0xffff
  const compatible = zero(0, 6) && (h[6] !== 0 || h[7]! > 1)
  const nat64 = h[0] === 0x64 && h[1] === 0xff9b && zero(2, 6)
  if (!mapped && !compatible && !nat64) return undefined
  return [h[6]! >> 8, h[6]! & 0xff, h[7]! >> 8, h[7]! & 0xff].join('.')
}

/** The eight 16-bit groups of an IPv6 literal (a trailing dotted IPv4 part included). */
function expandIpv6(address: string): number[] | undefined {
  let text = address.toLowerCase().replace(/%.*$/, '')
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.split('::') as [string, string | undefined]
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const fill = tail === undefined ? [] : new Array<string>(8 - left.length - right.length).fill('0')
  const groups = [...left, ...fill, ...right].map((g) => parseInt(g, 16))
  return groups.length === 8 && groups.every((g) => Number.isInteger(g)) ? groups : undefined
}

/** Whether `url` names a development host that may be reached over http and at a loopback address. */
export function isDevelopmentHost(url: URL): boolean {
  return url.hostname === 'localhost' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(url.hostname)
}

/**
 * Throw a WebhookRefusedError unless `url` may be delivered to by scheme and,
 * for an IP literal host, by address (a named host is checked by `checkedLookup`).
 */
export function checkWebhookUrl(url: URL): void {
  const dev = isDevelopmentHost(url)
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && dev)) {
    throw new WebhookRefusedError(`webhook URL ${url.origin} refused: only https (or http to localhost / 127.x) is allowed`)
  }
  const host = url.hostname.replace(/^\[|\]$/g, '')
  if (!dev && net.isIP(host) !== 0 && isBlockedAddress(host)) {
    throw new WebhookRefusedError(`webhook URL ${url.origin} refused: ${host} is not a public address`)
  }
}

/**
 * A lookup for the connection to `url`: resolves with `resolve` and fails
 * with a WebhookRefusedError when any address is not public (a development
 * host excepted).
 */
export function checkedLookup(url: URL, resolve: LookupFunction = dns.lookup): net.LookupFunction {
  const dev = isDevelopmentHost(url)
  return ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
    resolve(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error)
      const list = addresses as unknown as dns.LookupAddress[]
      const bad = dev ? undefined : list.find((a) => isBlockedAddress(a.address))
      if (list.length === 0) return callback(new WebhookRefusedError(`webhook host ${hostname} resolved to no address`))
      if (bad !== undefined) return callback(new WebhookRefusedError(`webhook host ${hostname} refused: it resolves to ${bad.address}, not a public address`))
      if (options.all === true) return callback(null, list)
      callback(null, list[0]!.address, list[0]!.family)
    })
  }) as net.LookupFunction
}
