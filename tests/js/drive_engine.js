// Drives a GTP engine the way Sabaki does, through @sabaki/gtp (its
// Controller, Command and Response, and sendCommand's per-line subscriber for
// streamed analysis), and prints one JSON object for tests/test_gtp.py.
//
//   node drive_engine.js SIZE PROGRAM [ARGS...]
//
// The engine starts in this process's working folder. Analysis is stopped
// as Sabaki stops it: by sending the next command while it streams.

const {Controller, Command, Response} = require('@sabaki/gtp')

const size = Number(process.argv[2])
const [program, ...programArgs] = process.argv.slice(3)
const letters = 'ABCDEFGHJKLMNOPQRSTUVWXYZ'
const vertex = /^([A-HJ-Za-hj-z][0-9]{1,2}|pass)$/i

function onBoard(v) {
  if (v.toLowerCase() === 'pass') return true
  const col = letters.indexOf(v[0].toUpperCase())
  const row = Number(v.slice(1))
  return col >= 0 && col < size && row >= 1 && row <= size
}

// One analysis line as key/value items, following KataGo's description:
// `info` starts a move's items, `pv` runs to the next key that is not a
// vertex, `ownership`/`movesOwnership` take size*size numbers, `rootInfo`
// starts the root's items. Consumers must accept any key order.
function parseAnalysis(line) {
  const words = line.trim().split(/\s+/)
  const infos = []
  let root = null
  let ownership = null
  let current = null
  let i = 0
  const grid = () => {
    const out = words.slice(i, i + size * size).map(Number)
    i += size * size
    return out
  }
  while (i < words.length) {
    const key = words[i++]
    if (key === 'info') {
      current = {}
      infos.push(current)
    } else if (key === 'rootInfo') {
      current = root = {}
    } else if (key === 'ownership') {
      ownership = grid()
    } else if (key === 'movesOwnership') {
      current.movesOwnership = grid()
    } else if (key === 'pv' || key === 'pvVisits') {
      const items = []
      while (i < words.length && (key === 'pv' ? vertex.test(words[i]) : /^[0-9]+$/.test(words[i])))
        items.push(words[i++])
      current[key] = items
    } else {
      current[key] = words[i++]
    }
  }
  return {infos, root, ownership}
}

// A streamed analysis: the lines as they came, then stopped by `stopWith`
// once `enough` info lines arrived (or after `waitMs`).
async function analyze(engine, command, {enough = 2, waitMs = 60000, stopWith = null} = {}) {
  const lines = []
  let done
  const gotEnough = new Promise(resolve => (done = resolve))
  const t0 = Date.now()
  const responsePromise = engine.sendCommand(Command.fromString(command), ({line}) => {
    if (line.startsWith('info ') || line.startsWith('play ')) lines.push({line, ms: Date.now() - t0})
    if (lines.filter(x => x.line.startsWith('info ')).length >= enough) done()
  })
  let stopped = null
  if (stopWith != null) {
    let timer
    await Promise.race([gotEnough, new Promise(resolve => (timer = setTimeout(resolve, waitMs)))])
    clearTimeout(timer)
    stopped = await engine.sendCommand(Command.fromString(stopWith))
  }
  const response = await responsePromise
  return {
    command,
    error: response.error,
    id: response.id,
    lines: lines.map(x => x.line),
    ms: lines.map(x => x.ms),
    parsed: lines.filter(x => x.line.startsWith('info ')).map(x => parseAnalysis(x.line)),
    play: (lines.find(x => x.line.startsWith('play ')) || {line: ''}).line.slice(5),
    stoppedBy: stopped && {error: stopped.error, content: stopped.content}
  }
}

async function main() {
  const engine = new Controller(program, programArgs, {cwd: process.cwd()})
  const stderr = []
  engine.on('stderr', ({content}) => stderr.push(content))
  engine.start()
  const ask = async text => {
    const r = await engine.sendCommand(Command.fromString(text))
    return {error: r.error, id: r.id, content: r.content}
  }
  const out = {}
  out.name = await ask('1 name')
  out.protocol = await ask('2 protocol_version')
  out.commands = (await ask('list_commands')).content.split('\n')
  out.boardsize = await ask(`boardsize ${size}`)
  out.clear = await ask('clear_board')
  out.komi = await ask('komi 7')
  out.play = await ask('play B E5')
  out.illegal = await ask('play W E5')
  out.genmove = await ask('genmove W')
  out.genmoveOnBoard = vertex.test(out.genmove.content) && onBoard(out.genmove.content)
  out.boardAfterGenmove = (await ask('showboard')).content
  out.undo = await ask('undo')
  out.boardAfterUndo = (await ask('showboard')).content
  out.lz = await analyze(engine, '10 lz-analyze W 10', {stopWith: 'protocol_version'})
  out.kata = await analyze(engine, '11 kata-analyze W 10 ownership true', {stopWith: 'protocol_version'})
  out.kataGenmove = await analyze(engine, '12 kata-genmove_analyze W 10 ownership true')
  out.after = await ask('showboard')
  out.responseRoundTrip = Response.toString(Response.fromString('=5 D4'))
  await engine.stop()
  out.stderr = stderr
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch(err => {
  process.stderr.write(`drive_engine.js: ${err.stack || err}\n`)
  process.exit(1)
})
