import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { describe, test } from 'node:test';
import {
  type AddressClass,
  checkedLookup,
  checkLiteralHost,
  checkWebhookUrl,
  classifyAddress,
  type Resolve,
} from '../../src/webhooks/address-policy.js';

// These tests never open a socket: the lookup is called as a plain function.

const CLASSES: Record<AddressClass, readonly string[]> = {
  public: ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '198.20.0.1', '93.184.216.34', '2606:4700::1111'],
  unspecified: ['0.0.0.0', '::', '0:0:0:0:0:0:0:0'],
  loopback: ['127.0.0.1', '127.255.255.254', '::1', '0:0:0:0:0:0:0:1'],
  private: ['10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.1.1', 'fec0::1'],
  'link-local': ['169.254.169.254', '169.254.0.1', 'fe80::1', 'febf::1', 'fe80::1%eth0'],
  'unique-local': ['fc00::1', 'fd12:3456::1', 'FDFF::1'],
  cgnat: ['100.64.0.1', '100.127.255.255'],
  multicast: ['224.0.0.1', '239.255.255.250', 'ff02::1', 'ff0e::1'],
  broadcast: ['255.255.255.255'],
  reserved: ['0.1.2.3', '240.0.0.1', '255.255.255.254', '192.0.0.8', '100::1', '5f00::1', '64:ff9b:1::1'],
  documentation: ['192.0.2.1', '198.51.100.7', '203.0.113.255', '2001:db8::1', '3fff::1'],
  benchmarking: ['198.18.0.1', '198.19.255.255', '2001:2::1'],
  invalid: ['', 'example.com', '[::1]', '127.0.0.1:80', '1.2.3.256', '2130706433', '0x7f.1'],
};

/** The same address in the IPv6 forms that embed an IPv4 address. */
const EMBEDDED: readonly (readonly [string, AddressClass])[] = [
  ['::ffff:127.0.0.1', 'loopback'], // IPv4-mapped, RFC 4291 §2.5.5.2
  ['::ffff:7f00:1', 'loopback'], // the same, hex form
  ['0:0:0:0:0:ffff:7f00:1', 'loopback'], // the same, uncompressed
  ['::FFFF:10.0.0.1', 'private'],
  ['::ffff:169.254.169.254', 'link-local'],
  ['::ffff:8.8.8.8', 'public'], // the mapped form reaches the same public host
  ['::127.0.0.1', 'loopback'], // IPv4-compatible, deprecated (RFC 4291 §2.5.5.1)
  ['::7f00:1', 'loopback'],
  ['::10.0.0.1', 'private'],
  ['::8.8.8.8', 'reserved'],
  ['::ffff:0:7f00:1', 'reserved'], // SIIT IPv4-translated (RFC 2765): outside global unicast
  ['64:ff9b::10.0.0.1', 'private'], // NAT64, RFC 6052
  ['64:ff9b::7f00:1', 'loopback'],
  ['64:ff9b::169.254.169.254', 'link-local'],
  ['64:ff9b::8.8.8.8', 'public'],
  ['2002:a00:1::1', 'private'], // 6to4, RFC 3056: 2002:<10.0.0.1>::
  ['2002:7f00:1::', 'loopback'],
  ['2002:c0a8:101:1::1', 'private'], // 192.168.1.1
  ['2002:a9fe:a9fe::1', 'link-local'],
  ['2002:808:808::1', 'public'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'], // Teredo, refused whole
];

describe('classifyAddress', () => {
  for (const [expected, addresses] of Object.entries(CLASSES)) {
    test(`classifies ${addresses.map((a) => JSON.stringify(a)).join(', ')} as ${expected}`, () => {
      for (const address of addresses) assert.equal(classifyAddress(address), expected, address);
    });
  }

  test('looks through IPv4-mapped, IPv4-compatible, NAT64, 6to4 and Teredo addresses', () => {
    for (const [address, expected] of EMBEDDED) assert.equal(classifyAddress(address), expected, address);
  });

  test('respects the edges of each range', () => {
    assert.equal(classifyAddress('9.255.255.255'), 'public');
    assert.equal(classifyAddress('11.0.0.0'), 'public');
    assert.equal(classifyAddress('172.15.255.255'), 'public');
    assert.equal(classifyAddress('100.63.255.255'), 'public');
    assert.equal(classifyAddress('223.255.255.255'), 'public');
    assert.equal(classifyAddress('192.0.1.255'), 'public');
    assert.equal(classifyAddress('1fff:ffff::1'), 'reserved'); // below global unicast 2000::/3
    assert.equal(classifyAddress('4000::1'), 'reserved'); // above it
    assert.equal(classifyAddress('2001:db9::1'), 'public');
    assert.equal(classifyAddress('fe7f::1'), 'reserved');
  });
});

describe('checkLiteralHost', () => {
  test('refuses literal non-public addresses and loopback names, in URL hostname form', () => {
    for (const host of [
      '127.0.0.1',
      '[::1]',
      '[::ffff:7f00:1]',
      '10.0.0.1',
      '[fd00::1]',
      'localhost',
      'api.localhost.',
    ]) {
      const result = checkLiteralHost(host, { allowPrivate: false });
      assert.equal(result.ok, false, host);
    }
    assert.deepEqual(checkLiteralHost('[fe80::1]', { allowPrivate: false }), {
      ok: false,
      reason: 'refused address fe80::1 (link-local)',
      address: 'fe80::1',
      kind: 'link-local',
    });
  });

  test('passes public literals and names (names are checked after resolution)', () => {
    for (const host of ['8.8.8.8', '[2606:4700::1111]', 'hooks.example.com', 'localhost.example.com']) {
      assert.deepEqual(checkLiteralHost(host, { allowPrivate: false }), { ok: true }, host);
    }
  });

  test('passes everything when private targets are allowed', () => {
    assert.deepEqual(checkLiteralHost('127.0.0.1', { allowPrivate: true }), { ok: true });
  });
});

describe('checkWebhookUrl', () => {
  const strict = { allowPrivate: false };
  const reason = (url: string, allowPrivate = false): string | undefined => {
    const result = checkWebhookUrl(url, { allowPrivate });
    return result.ok ? undefined : result.reason;
  };

  test('accepts an absolute https URL to a name or a public address', () => {
    for (const url of ['https://hooks.example.com/plants?x=1', 'https://8.8.8.8:8443/', 'https://[2606:4700::1111]/']) {
      const result = checkWebhookUrl(url, strict);
      assert.ok(result.ok, url);
      assert.equal(result.url.href, url);
    }
  });

  test('answers the normalised URL', () => {
    const result = checkWebhookUrl('HTTPS://Hooks.Example.COM:443/a/../b', strict);
    assert.ok(result.ok);
    assert.equal(result.url.href, 'https://hooks.example.com/b');
  });

  test('refuses what is not an absolute http(s) URL', () => {
    assert.equal(reason('/relative'), 'the webhook URL must be an absolute URL');
    assert.equal(reason('hooks.example.com/x'), 'the webhook URL must be an absolute URL');
    assert.equal(reason('https://exa mple.com/'), 'the webhook URL must be an absolute URL');
    assert.equal(reason('http://hooks.example.com/'), 'the webhook URL must use https');
    assert.equal(reason('ftp://hooks.example.com/'), 'the webhook URL must use https');
    assert.equal(reason('file:///etc/passwd', true), 'the webhook URL must use http or https');
    assert.equal(reason('javascript:alert(1)', true), 'the webhook URL must use http or https');
  });

  test('marks the refusals WEBHOOK_ALLOW_PRIVATE=1 lifts: http://, a literal non-public host; not another scheme', () => {
    const privateOnly = (url: string): boolean | undefined => {
      const result = checkWebhookUrl(url, strict);
      assert.ok(!result.ok, url);
      return result.privateOnly;
    };
    assert.equal(privateOnly('http://hooks.example.com/'), true);
    assert.equal(privateOnly('https://10.0.0.1/'), true);
    assert.equal(privateOnly('https://localhost/'), true);
    assert.equal(privateOnly('ftp://hooks.example.com/'), undefined);
    assert.equal(privateOnly('https://user@hooks.example.com/'), undefined);
  });

  test('refuses user information and fragments, even empty ones', () => {
    const userinfo = 'the webhook URL must not contain a user name or password';
    assert.equal(reason('https://user:pass@hooks.example.com/'), userinfo);
    assert.equal(reason('https://user@hooks.example.com/'), userinfo);
    assert.equal(reason('https://:pass@hooks.example.com/'), userinfo);
    assert.equal(reason('https://hooks.example.com/#top'), 'the webhook URL must not contain a fragment');
    assert.equal(reason('https://hooks.example.com/#'), 'the webhook URL must not contain a fragment');
  });

  test('refuses URLs longer than 2048 characters', () => {
    const base = 'https://hooks.example.com/';
    assert.ok(checkWebhookUrl(base + 'a'.repeat(2048 - base.length), strict).ok);
    assert.equal(reason(base + 'a'.repeat(2049 - base.length)), 'the webhook URL must be at most 2048 characters');
    // Percent-encoding lengthens the URL that would be stored and sent.
    assert.equal(reason(base + ' x'.repeat(600)), 'the webhook URL must be at most 2048 characters');
  });

  test('refuses literal non-public hosts in every spelling WHATWG parsing turns into an address', () => {
    const cases: readonly (readonly [string, string])[] = [
      ['https://127.0.0.1/', '127.0.0.1 (loopback)'],
      ['https://2130706433/', '127.0.0.1 (loopback)'],
      ['https://0x7f.1/', '127.0.0.1 (loopback)'],
      ['https://127.1/', '127.0.0.1 (loopback)'],
      ['https://0177.0.0.1/', '127.0.0.1 (loopback)'],
      ['https://127.0.0.1./', '127.0.0.1 (loopback)'],
      ['https://0/', '0.0.0.0 (unspecified)'],
      ['https://10.0.0.1:8443/hook', '10.0.0.1 (private)'],
      ['https://169.254.169.254/latest/meta-data/', '169.254.169.254 (link-local)'],
      ['https://[::1]/', '::1 (loopback)'],
      ['https://[::ffff:127.0.0.1]/', '::ffff:7f00:1 (loopback)'],
      ['https://[::ffff:7f00:1]/', '::ffff:7f00:1 (loopback)'],
      ['https://[::127.0.0.1]/', '::7f00:1 (loopback)'],
      ['https://[fd00::1]/', 'fd00::1 (unique-local)'],
      ['https://[fe80::1]/', 'fe80::1 (link-local)'],
      ['https://[64:ff9b::10.0.0.1]/', '64:ff9b::a00:1 (private)'],
      ['https://[2002:a00:1::1]/', '2002:a00:1::1 (private)'],
      ['https://localhost/', 'localhost (loopback)'],
      ['https://hooks.localhost/', 'hooks.localhost (loopback)'],
      ['https://LOCALHOST./', 'localhost. (loopback)'],
    ];
    for (const [url, refused] of cases) {
      assert.equal(reason(url), `the webhook URL must point at a public address, not ${refused}`, url);
    }
  });

  test('allows http and private targets when private targets are allowed', () => {
    for (const url of ['http://127.0.0.1:8080/hook', 'http://localhost/', 'https://[::1]/', 'http://10.0.0.1/']) {
      assert.ok(checkWebhookUrl(url, { allowPrivate: true }).ok, url);
    }
    // ...but the other rules still hold.
    assert.equal(reason('http://u:p@127.0.0.1/', true), 'the webhook URL must not contain a user name or password');
  });
});

/** Calls a lookup as net.connect would, without connecting anywhere. */
function callLookup(
  lookup: LookupFunction,
  hostname: string,
  options: { all?: boolean; family?: number },
): Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }> {
  return new Promise((resolve) => {
    lookup(hostname, options, (error, address, family) => resolve({ error, address, family }));
  });
}

const resolver = (...addresses: string[]): Resolve & { calls: string[] } => {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { calls });
};

describe('checkedLookup', () => {
  test('answers the public addresses it checked, in the form asked for, after one resolution', async () => {
    const resolve = resolver('93.184.216.34', '2606:2800:220:1::1');
    const lookup = checkedLookup({ allowPrivate: false, resolve });
    const all = await callLookup(lookup, 'hooks.example.com', { all: true });
    assert.equal(all.error, null);
    assert.deepEqual(all.address, [
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ]);
    const one = await callLookup(lookup, 'hooks.example.com', { all: false });
    assert.deepEqual([one.error, one.address, one.family], [null, '93.184.216.34', 4]);
    const v6 = await callLookup(lookup, 'hooks.example.com', { family: 6 });
    assert.deepEqual([v6.error, v6.address, v6.family], [null, '2606:2800:220:1::1', 6]);
    assert.deepEqual(resolve.calls, ['hooks.example.com', 'hooks.example.com', 'hooks.example.com']);
  });

  test('refuses the host when any resolved address is not public, naming host and address', async () => {
    for (const addresses of [['10.0.0.5'], ['93.184.216.34', '10.0.0.5'], ['2606:4700::1111', '::ffff:10.0.0.5']]) {
      const lookup = checkedLookup({ allowPrivate: false, resolve: resolver(...addresses) });
      for (const all of [true, false]) {
        const { error } = await callLookup(lookup, 'hooks.example.com', { all });
        const refused = addresses.at(-1) ?? '';
        assert.ok(error, `${addresses.join(',')} all=${all}`);
        assert.equal(error.code, 'EWEBHOOKADDRESS');
        assert.equal(error.message, `refused address ${refused} for host hooks.example.com (private)`);
      }
    }
  });

  test('refuses loopback, link-local and unique-local answers too', async () => {
    for (const [address, kind] of [
      ['127.0.0.1', 'loopback'],
      ['::1', 'loopback'],
      ['169.254.169.254', 'link-local'],
      ['fd00::1', 'unique-local'],
      ['64:ff9b::7f00:1', 'loopback'],
    ]) {
      const lookup = checkedLookup({ allowPrivate: false, resolve: resolver(address ?? '') });
      const { error } = await callLookup(lookup, 'rebind.example', { all: true });
      assert.equal(error?.message, `refused address ${address} for host rebind.example (${kind})`);
    }
  });

  test('allows private answers when private targets are allowed, but never garbage', async () => {
    const lookup = checkedLookup({ allowPrivate: true, resolve: resolver('10.0.0.5', '::1') });
    const { error, address } = await callLookup(lookup, 'dev.example', { all: true });
    assert.equal(error, null);
    assert.deepEqual(address, [
      { address: '10.0.0.5', family: 4 },
      { address: '::1', family: 6 },
    ]);
    const garbage = checkedLookup({ allowPrivate: true, resolve: resolver('not-an-ip') });
    assert.equal((await callLookup(garbage, 'dev.example', {})).error?.code, 'EWEBHOOKADDRESS');
  });

  test('passes resolver failures on and reports an empty answer as not found', async () => {
    const failing = checkedLookup({
      allowPrivate: false,
      resolve: () =>
        Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.example'), { code: 'ENOTFOUND' })),
    });
    assert.equal((await callLookup(failing, 'nowhere.example', { all: true })).error?.code, 'ENOTFOUND');
    const empty = checkedLookup({ allowPrivate: false, resolve: resolver() });
    assert.equal((await callLookup(empty, 'nowhere.example', {})).error?.code, 'ENOTFOUND');
    const wrongFamily = checkedLookup({ allowPrivate: false, resolve: resolver('93.184.216.34') });
    assert.equal((await callLookup(wrongFamily, 'v4only.example', { family: 6 })).error?.code, 'ENOTFOUND');
  });
});
