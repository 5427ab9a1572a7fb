/**
 * The webhook signing key (PROTOCOL.md §6.5, §7.1, §12.10): one Ed25519 key
 * per handler, its `kid` (derived from the key material: `ds_` and the start
 * of its RFC 7638 JWK thumbprint), the public JWK Set served at
 * `__ds/jwks.json`, and the `Webhook-Signature` header of a delivery. The
 * private key never leaves this file.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'

/** A public key as a JWK Set entry. */
export interface WebhookJwk {
  kty: 'OKP'
  crv: 'Ed25519'
  kid: string
  use: 'sig'
  alg: 'EdDSA'
  x: string
}

export class WebhookSigner {
  /** The active key's id, as in the JWK Set and in every signature header. */
  readonly kid: string
  private readonly privateKey: KeyObject
  private readonly jwk: WebhookJwk

  /** A signer over `key` (a KeyObject or a PEM private key), or over a new key when none is given. */
  constructor(key?: KeyObject | string) {
    this.privateKey = key === undefined ? generateKeyPairSync('ed25519').privateKey : toPrivateKey(key)
    const { x } = createPublicKey(this.privateKey).export({ format: 'jwk' }) as { x: string }
    this.kid = `ds_${thumbprint(x).slice(0, 22)}`
    this.jwk = { kty: 'OKP', crv: 'Ed25519', kid: this.kid, use: 'sig', alg: 'EdDSA', x }
  }

  /** The JWK Set of the public keys a receiver may meet (the active one). */
  jwks(): { keys: WebhookJwk[] } {
    return { keys: [{ ...this.jwk }] }
  }

  /** `t=<unix seconds>,kid=<kid>,ed25519=<base64url signature over "<t>.<body>">`. */
  signatureHeader(body: Buffer, nowMs: number = Date.now()): string {
    const t = Math.floor(nowMs / 1000)
    const signature = sign(null, Buffer.concat([Buffer.from(`${t}.`), body]), this.privateKey)
    return `t=${t},kid=${this.kid},ed25519=${signature.toString('base64url')}`
  }
}

/** An Ed25519 private KeyObject from a KeyObject or PEM text; anything else is a TypeError. */
function toPrivateKey(key: KeyObject | string): KeyObject {
  let object: KeyObject
  try {
    object = typeof key === 'string' ? createPrivateKey(key) : key
  } catch (error) {
    throw new TypeError(`subscriptions.signingKey is not a PEM private key: ${(error as Error).message}`)
  }
  if (object.type !== 'private' || object.asymmetricKeyType !== 'ed25519') {
    throw new TypeError(`subscriptions.signingKey must be an Ed25519 private key, got a ${object.asymmetricKeyType ?? object.type} ${object.type} key.`)
  }
  return object
}

/** The RFC 7638 thumbprint of an Ed25519 public key: SHA-256 of its required members in lexical order, base64url. */
function thumbprint(x: string): string {
  return createHash('sha256').update(JSON.stringify({ crv: 'Ed25519', kty: 'OKP', x })).digest('base64url')
}
