// Google's official Node.js client (@google-cloud/storage, pinned in
// package.json) against the real mlengined, unchanged, in emulator mode:
// STORAGE_EMULATOR_HOST=http://HOST:PORT/_token/TOKEN, as trainers use it.
'use strict';

const assert = require('node:assert/strict');
const {after, before, describe, test} = require('node:test');
const {execFileSync} = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');

const {startServer} = require('./server.js');

const MIB = 1024 * 1024;
let server;
let storage;

function randomBytes(n) {
  // crypto.randomBytes is slow for 64 MiB; a repeated random block is enough.
  const block = crypto.randomBytes(MIB);
  const out = Buffer.alloc(n);
  for (let at = 0; at < n; at += block.length) block.copy(out, at, 0, Math.min(block.length, n - at));
  out.writeUInt32BE(n, 0);  // objects of different sizes differ
  return out;
}

// The client reports a failed precondition as code 412 (JSON API) or as a
// plain HTTP error naming the status (resumable uploads).
function is412(err) {
  return err.code === 412 || err.status === 412 || /status code 412/.test(err.message);
}

function md5(buf) {
  return crypto.createHash('md5').update(buf).digest('base64');
}

// One raw HTTP request (for what the client does not expose).
function raw(method, url, {headers = {}, body} = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {method, headers}, res => {
      const chunks = [];
      res.on('data', c => chunks.push(c));
      res.on('end', () => resolve({status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks)}));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function newBucket(name) {
  const [bucket] = await storage.createBucket(name);
  return bucket;
}

before(async () => {
  server = await startServer();
  process.env.STORAGE_EMULATOR_HOST = server.emulatorHost;
  const {Storage} = require('@google-cloud/storage');
  storage = new Storage({projectId: 'storage-client-test', retryOptions: {maxRetries: 2, totalTimeout: 60}});
});

after(async () => {
  if (server) await server.stop();
});

describe('authentication', () => {
  test('a request without any credential is refused', async () => {
    const {Storage} = require('@google-cloud/storage');
    const saved = process.env.STORAGE_EMULATOR_HOST;
    process.env.STORAGE_EMULATOR_HOST = server.url;
    try {
      const anonymous = new Storage({projectId: 'x', retryOptions: {autoRetry: false}});
      await assert.rejects(anonymous.bucket('nobody-s-bucket').getFiles(), err => err.code === 401);
    } finally {
      process.env.STORAGE_EMULATOR_HOST = saved;
    }
    const r = await raw('GET', `${server.url}/storage/v1/b/nobody-s-bucket/o`);
    assert.equal(r.status, 401);
    // A path token and a different Authorization header disagree: refused.
    const both = await raw('GET', `${server.emulatorHost}/storage/v1/b/nobody-s-bucket/o`, {
      headers: {Authorization: 'Bearer someone-else'},
    });
    assert.equal(both.status, 401);
  });
});

describe('uploads and downloads', () => {
  let bucket;
  before(async () => {
    bucket = await newBucket('uploads-downloads');
  });

  test('small multipart upload with metadata, verified download', async () => {
    const file = bucket.file('dir/small.txt');
    await file.save('hello, storage', {
      resumable: false,
      metadata: {contentType: 'text/plain', metadata: {owner: 'trainer', step: '7'}},
    });
    const [meta] = await file.getMetadata();
    assert.equal(meta.size, '14');
    assert.equal(meta.contentType, 'text/plain');
    assert.deepEqual(meta.metadata, {owner: 'trainer', step: '7'});
    assert.equal(meta.md5Hash, md5(Buffer.from('hello, storage')));
    assert.ok(meta.crc32c);
    assert.ok(Number(meta.generation) > 0);
    assert.equal(meta.metageneration, '1');
    const [content] = await file.download();  // validates CRC32C and MD5
    assert.equal(content.toString(), 'hello, storage');
  });

  for (const resumable of [false, true]) {
    test(`64 MiB ${resumable ? 'resumable' : 'multipart'} upload and verified download`, async () => {
      const data = randomBytes(64 * MIB + (resumable ? 3 : 5));
      const file = bucket.file(`large/${resumable ? 'resumable' : 'multipart'}.bin`);
      await file.save(data, {resumable, validation: 'crc32c'});
      const [meta] = await file.getMetadata();
      assert.equal(meta.size, String(data.length));
      assert.equal(meta.md5Hash, md5(data));
      const [got] = await file.download({validation: 'md5'});
      assert.ok(got.equals(data));
      // Streamed download, CRC32C validated.
      const hash = crypto.createHash('md5');
      await new Promise((resolve, reject) =>
        file.createReadStream({validation: 'crc32c'}).on('data', c => hash.update(c)).on('end', resolve).on('error', reject));
      assert.equal(hash.digest('base64'), md5(data));
    });
  }

  test('chunked resumable upload, interrupted mid-chunk, resumed via the session URI', async () => {
    const data = randomBytes(24 * MIB + 11);
    const file = bucket.file('resumed.bin');
    const [uri] = await file.createResumableUpload();
    assert.match(uri, /\/_token\//, 'the session URI keeps the /_token/ prefix');
    // The first 8 MiB arrive whole.
    let r = await raw('PUT', uri, {headers: {'Content-Range': `bytes 0-${8 * MIB - 1}/*`}, body: data.subarray(0, 8 * MIB)});
    assert.equal(r.status, 308);
    assert.equal(r.headers.range, `bytes=0-${8 * MIB - 1}`);
    // The next piece: the connection dies halfway through its body.
    await new Promise(resolve => {
      const req = http.request(uri, {
        method: 'PUT',
        headers: {'Content-Range': `bytes ${8 * MIB}-${16 * MIB - 1}/*`, 'Content-Length': String(8 * MIB)},
      });
      req.on('error', () => resolve());
      req.write(data.subarray(8 * MIB, 12 * MIB), () => {
        req.destroy();
        resolve();
      });
    });
    // Nothing of the broken piece counts: the status says 8 MiB.
    r = await raw('PUT', uri, {headers: {'Content-Range': 'bytes */*'}});
    assert.equal(r.status, 308);
    assert.equal(r.headers.range, `bytes=0-${8 * MIB - 1}`);
    // The client resumes from the session URI: it asks for the offset and
    // sends only the rest.
    await new Promise((resolve, reject) => {
      const stream = file.createWriteStream({uri, resumable: true, validation: false});
      stream.on('error', reject).on('finish', resolve);
      stream.end(data);
    });
    const [meta] = await file.getMetadata();
    assert.equal(meta.size, String(data.length));
    assert.equal(meta.md5Hash, md5(data));
    const [got] = await file.download();
    assert.ok(got.equals(data));
  });

  test('a cancelled session is gone (499, then 404)', async () => {
    const [uri] = await bucket.file('cancelled.bin').createResumableUpload();
    let r = await raw('DELETE', uri);
    assert.equal(r.status, 499);
    r = await raw('PUT', uri, {headers: {'Content-Range': 'bytes */*'}});
    assert.equal(r.status, 404);
    const [exists] = await bucket.file('cancelled.bin').exists();
    assert.equal(exists, false);
  });

  test('ranged downloads', async () => {
    const data = randomBytes(3 * MIB);
    const file = bucket.file('ranged.bin');
    await file.save(data, {resumable: false});
    for (const [start, end] of [[0, 0], [10, 1000], [MIB, 2 * MIB + 17], [3 * MIB - 5, 3 * MIB - 1]]) {
      const [got] = await file.download({start, end});
      assert.ok(got.equals(data.subarray(start, end + 1)), `range ${start}-${end}`);
    }
    const [tail] = await file.download({start: 3 * MIB - 100});
    assert.ok(tail.equals(data.subarray(3 * MIB - 100)));
  });

  test('a corrupted object file is detected by the client on download', async () => {
    const data = randomBytes(2 * MIB);
    const file = bucket.file('rotten.bin');
    await file.save(data, {resumable: false});
    // Bit rot: the bytes change on disk, the file's size and mtime do not,
    // so the stored checksums are still believed and no longer match.
    const onDisk = path.join(server.bucketsDir, 'uploads-downloads', 'rotten.bin');
    const stamp = path.join(server.root, 'rotten.stamp');
    fs.writeFileSync(stamp, '');
    execFileSync('touch', ['-m', '-r', onDisk, stamp]);
    const fd = fs.openSync(onDisk, 'r+');
    fs.writeSync(fd, Buffer.from('XXXX'), 0, 4, MIB);
    fs.closeSync(fd);
    execFileSync('touch', ['-m', '-r', stamp, onDisk]);
    for (const validation of ['crc32c', 'md5']) {
      await assert.rejects(file.download({validation}), err => err.code === 'CONTENT_DOWNLOAD_MISMATCH', validation);
    }
  });
});

describe('listing', () => {
  let bucket;
  const names = ['a/1', 'a/2', 'a/b/3', 'b/1', 'c', 'd', 'e/x/y'];
  before(async () => {
    bucket = await newBucket('listing');
    for (const n of names) await bucket.file(n).save(n, {resumable: false});
  });

  test('delimiter groups prefixes', async () => {
    const [files, , response] = await bucket.getFiles({delimiter: '/', autoPaginate: false});
    assert.deepEqual(files.map(f => f.name), ['c', 'd']);
    assert.deepEqual(response.prefixes, ['a/', 'b/', 'e/']);
    const [inA, , responseA] = await bucket.getFiles({prefix: 'a/', delimiter: '/', autoPaginate: false});
    assert.deepEqual(inA.map(f => f.name), ['a/1', 'a/2']);
    assert.deepEqual(responseA.prefixes, ['a/b/']);
  });

  test('pages of one item make up the whole listing', async () => {
    const seen = [];
    let query = {maxResults: 1, autoPaginate: false};
    for (let pages = 0; query; ++pages) {
      assert.ok(pages < 20);
      const [files, next] = await bucket.getFiles(query);
      assert.ok(files.length <= 1);
      seen.push(...files.map(f => f.name));
      query = next;
    }
    assert.deepEqual(seen, names);
  });

  test('startOffset and endOffset', async () => {
    const [files] = await bucket.getFiles({startOffset: 'a/2', endOffset: 'd'});
    assert.deepEqual(files.map(f => f.name), ['a/2', 'a/b/3', 'b/1', 'c']);
  });
});

describe('preconditions, copies, compose, metadata, deletes', () => {
  let bucket;
  before(async () => {
    bucket = await newBucket('object-ops');
  });

  test('ifGenerationMatch: 0 means must not exist; a stale generation fails with 412', async () => {
    const file = bucket.file('guarded');
    await file.save('v1', {resumable: false, preconditionOpts: {ifGenerationMatch: 0}});
    await assert.rejects(file.save('v2', {resumable: false, preconditionOpts: {ifGenerationMatch: 0}}),
                         is412);
    const [meta] = await file.getMetadata();
    await file.save('v2', {resumable: false, preconditionOpts: {ifGenerationMatch: Number(meta.generation)}});
    await assert.rejects(file.save('v3', {resumable: false, preconditionOpts: {ifGenerationMatch: Number(meta.generation)}}),
                         is412);
    await assert.rejects(file.save('v3', {resumable: true, preconditionOpts: {ifGenerationMatch: Number(meta.generation)}}),
                         is412);
    const [content] = await file.download();
    assert.equal(content.toString(), 'v2');
  });

  test('copy, rewrite (move), compose and metadata patch', async () => {
    await bucket.file('part1').save('hello ', {resumable: false, metadata: {contentType: 'text/plain'}});
    await bucket.file('part2').save('world', {resumable: false});
    const [copy] = await bucket.file('part1').copy(bucket.file('copies/part1'));
    const [copyMeta] = await copy.getMetadata();
    assert.equal(copyMeta.contentType, 'text/plain');
    assert.equal((await copy.download())[0].toString(), 'hello ');
    const [composed] = await bucket.combine(['part1', 'part2'], 'joined.txt');
    assert.equal((await composed.download())[0].toString(), 'hello world');
    const [joinedMeta] = await composed.getMetadata();
    assert.equal(joinedMeta.md5Hash, md5(Buffer.from('hello world')));
    // Copy into another bucket, across a rename (move = rewrite + delete).
    const other = await newBucket('object-ops-other');
    await bucket.file('part2').move(other.file('moved'));
    assert.equal((await bucket.file('part2').exists())[0], false);
    assert.equal((await other.file('moved').download())[0].toString(), 'world');
    // Metadata patch bumps the metageneration; ifMetagenerationMatch guards it.
    const file = bucket.file('joined.txt');
    const [patched] = await file.setMetadata({metadata: {stage: 'final'}, contentType: 'text/x-joined'});
    assert.equal(patched.metageneration, '2');
    assert.deepEqual(patched.metadata, {stage: 'final'});
    await assert.rejects(file.setMetadata({metadata: {stage: 'again'}}, {ifMetagenerationMatch: 1}),
                         is412);
    const [meta] = await file.getMetadata();
    assert.equal(meta.contentType, 'text/x-joined');
  });

  test('deleting objects and buckets; a bucket that is not empty is refused', async () => {
    const b = await newBucket('to-delete');
    await b.file('only').save('x', {resumable: false});
    await assert.rejects(b.delete(), err => err.code === 409);
    await b.file('only').delete();
    await assert.rejects(b.file('only').delete(), err => err.code === 404);
    await b.delete();
    assert.equal((await b.exists())[0], false);
  });

  test('bad input is refused with 400', async () => {
    await assert.rejects(bucket.file('a/../../etc/passwd').save('x', {resumable: false}), err => err.code === 400);
    await assert.rejects(bucket.file('big-metadata').save('x', {resumable: false, metadata: {metadata: {k: 'v'.repeat(9000)}}}),
                         err => err.code === 400);
    await assert.rejects(bucket.file('bad-md5').save('x', {resumable: false, metadata: {md5Hash: md5(Buffer.from('y'))}}),
                         err => err.code === 400);
    assert.equal((await bucket.file('bad-md5').exists())[0], false);
  });
});
