'use strict';

// The performance workloads of asyncsteps (see bench/bench_test.go and
// docs/PERFORMANCE.md) run on the JavaScript reference implementation,
// futoin-asyncsteps, on its real event loop (setImmediate/setTimeout).
//
//   NODE_ENV=production node --expose-gc workloads.js [options] [name...]
//
// Names select workloads (default: all but seq-queued-1M; see WORKLOADS
// below).
// Options:
//   --min-time=S    run each workload for at least S seconds (default 1)
//   --limit=S       time limit of one run of a workload that may not finish,
//                   such as seq-queued-1M (default 600); past it the flow is
//                   canceled and a lower bound is reported
//
// Output: one JSON object per line and per workload:
//   {"workload":"a","name":"seq","n":1000000,"unit":"step",
//    "metric":"ns/step","value":1234.5,"runs":1,"lower_bound":false,...}
// A line with "lower_bound":true means the run hit --limit after "done" of
// "n" units; "value" is then elapsed/n, a lower bound of the real figure.

if ( process.env.NODE_ENV !== 'production' ) {
    // futoin-asyncsteps reads NODE_ENV when it is loaded: without it, every
    // add() checks its arguments and every step keeps an execution stack.
    process.stderr.write( 'workloads.js: set NODE_ENV=production\n' );
    process.exit( 2 );
}

const $as = require( 'futoin-asyncsteps' );
const { performance } = require( 'perf_hooks' );

const callImmediate = $as.AsyncTool.callImmediate;

// ---------------------------------------------------------------------------
// Helpers

// newCounter returns a function to call once per finished flow and a promise
// that resolves after the n-th call.
function newCounter( n ) {
    let done;
    const p = new Promise( ( resolve ) => {
        done = resolve;
    } );
    let left = n;
    const tick = () => {
        if ( --left === 0 ) {
            done();
        }
    };
    return { tick, p };
}

// runFlow executes a flow and resolves when its last step has run. A flow
// that fails stops silently in the reference: the guard in main() reports it
// when the event loop runs dry with the workload unfinished.
function runFlow( asi ) {
    return new Promise( ( resolve ) => {
        asi.add( () => resolve() );
        asi.execute();
    } );
}

// ---------------------------------------------------------------------------
// Workloads: each is an async function of one run that returns nothing (a
// completed run of n units) or {done} (a run canceled by the time limit after
// done units).

// a. seq: one flow, repeat(n), each iteration success(i).
function seq( n ) {
    return async () => {
        const asi = $as();
        asi.repeat( n, ( as, i ) => as.success( i ) );
        await runFlow( asi );
    };
}

// a'. seq-flat: flows flows of steps queued steps each, executed at once;
// the first step calls success(1), each other passes its argument on.
function seqFlat( flows, steps ) {
    const first = ( as ) => as.success( 1 );
    const pass = ( as, v ) => as.success( v );
    return async () => {
        const { tick, p } = newCounter( flows );
        const last = () => tick();
        for ( let f = 0; f < flows; ++f ) {
            const asi = $as();
            asi.add( first );
            for ( let i = 1; i < steps; ++i ) {
                asi.add( pass );
            }
            asi.add( last );
            asi.execute();
        }
        await p;
    };
}

// The shape of the first measurements, for a note only: one flow of n
// steps queued up front, each success(1000). The reference's queue is an
// array whose shift() copies it past about 16k entries: its time per step
// grows with the queue, so this run has a time limit.
function seqQueued( n ) {
    return ( { deadline } ) => new Promise( ( resolve ) => {
        const asi = $as();
        let count = 0;
        const step = ( as ) => {
            // Check the clock every 4096 steps only: the check costs
            // nothing next to a step. Past the deadline, the unhandled
            // error ends the flow and drops the rest of its queue.
            if ( ( ++count & 4095 ) === 0 && performance.now() > deadline ) {
                resolve( { done: count } );
                as.error( 'TimeLimit' );
            }
            as.success( 1000 );
        };
        for ( let i = 0; i < n; ++i ) {
            asi.add( step );
        }
        asi.add( () => resolve() );
        asi.execute();
    } );
}

// b. nested: repeat(n), each iteration adds one sub-step.
function nested( n ) {
    return async () => {
        const asi = $as();
        const inner = ( as ) => as.success();
        asi.repeat( n, ( as ) => {
            as.add( inner );
        } );
        await runFlow( asi );
    };
}

// c. many-flows: n independent flows of 3 steps each.
function manyFlows( n ) {
    const s1 = ( as ) => as.success( 1 );
    const s2 = ( as, v ) => as.success( v + 1 );
    return async () => {
        const { tick, p } = newCounter( n );
        const last = () => tick();
        for ( let i = 0; i < n; ++i ) {
            const asi = $as();
            asi.add( s1 ).add( s2 ).add( s2 ).add( last );
            asi.execute();
        }
        await p;
    };
}

// d. parallel: a parallel of branches one-step branches, times times.
function parallel( branches, times ) {
    return async () => {
        const asi = $as();
        const branch = ( as ) => as.success();
        asi.repeat( times, ( as ) => {
            const p = as.parallel();
            for ( let i = 0; i < branches; ++i ) {
                p.add( branch );
            }
        } );
        await runFlow( asi );
    };
}

// e. error: repeat(n), each iteration adds a step that calls error('E'),
// caught by its own handler that calls success().
function error( n ) {
    return async () => {
        const asi = $as();
        const fail = ( as ) => as.error( 'E' );
        const recover = ( as, _err ) => as.success();
        asi.repeat( n, ( as ) => {
            as.add( fail, recover );
        } );
        await runFlow( asi );
    };
}

// f. mutex: n flows of syncs sync steps each on one Mutex(10), one-step
// critical section, executed at once.
function mutex( n, syncs ) {
    const section = ( as ) => as.success();
    return async () => {
        const mtx = new $as.Mutex( 10 );
        const { tick, p } = newCounter( n );
        const last = () => tick();
        for ( let i = 0; i < n; ++i ) {
            const asi = $as();
            for ( let j = 0; j < syncs; ++j ) {
                asi.sync( mtx, section );
            }
            asi.add( last );
            asi.execute();
        }
        await p;
    };
}

// g. timers: n flows whose step sets setTimeout(1 s) and is completed by an
// AsyncTool.callImmediate callback.
function timers( n ) {
    const step = ( as ) => {
        as.setTimeout( 1000 );
        callImmediate( () => as.success() );
    };
    return async () => {
        const { tick, p } = newCounter( n );
        const last = () => tick();
        for ( let i = 0; i < n; ++i ) {
            const asi = $as();
            asi.add( step ).add( last );
            asi.execute();
        }
        await p;
    };
}

// h. parked: n flows, each started with promise() and waiting in
// waitExternal at once; bytes per flow of heapUsed (and rss) after a full
// GC, before versus while parked: the flow, its queue and its Promise.
async function parked( n ) {
    const gc = global.gc;
    if ( typeof gc !== 'function' ) {
        throw new Error( 'parked needs node --expose-gc' );
    }
    const settle = () => new Promise( ( r ) => setImmediate( r ) );
    const measure = async () => {
        await settle();
        gc();
        gc();
        return process.memoryUsage();
    };

    let allParked;
    const allParkedP = new Promise( ( resolve ) => {
        allParked = resolve;
    } );
    const step = ( as ) => {
        as.waitExternal();
        waiting[parked++] = as;
        if ( parked === n ) {
            allParked();
        }
    };
    // The harness keeps a slot per flow for its waiting step and one for
    // its promise, allocated before the first measurement, as the Go
    // benchmark does.
    let waiting = new Array( n ).fill( null );
    const promises = new Array( n ).fill( null );
    let parked = 0;

    const before = await measure();
    for ( let i = 0; i < n; ++i ) {
        const asi = $as();
        asi.add( step );
        promises[i] = asi.promise();
    }
    await allParkedP;
    const after = await measure();
    for ( const as of waiting ) {
        as.success();
    }
    await Promise.all( promises );
    waiting = null;
    return {
        value: ( after.heapUsed - before.heapUsed ) / n,
        rss_per_unit: ( after.rss - before.rss ) / n,
        heap_before: before.heapUsed,
        heap_after: after.heapUsed,
        rss_before: before.rss,
        rss_after: after.rss,
    };
}

// ---------------------------------------------------------------------------
// The table of workloads: name, workload letter, units per run, unit, run.
// "slow" workloads are left out unless named: seq-queued-1M does not finish
// in minutes (the reference's queue is an array whose shift() copies it).

const WORKLOADS = [
    { name: 'seq', w: 'a', n: 1000000, unit: 'step', run: seq( 1000000 ) },
    { name: 'seq-flat', w: 'a', n: 1000000, unit: 'step', run: seqFlat( 100, 10000 ) },
    { name: 'seq-queued-1M', w: 'a', n: 1000000, unit: 'step', run: seqQueued( 1000000 ), slow: true },
    { name: 'nested', w: 'b', n: 1000000, unit: 'outer', run: nested( 1000000 ) },
    { name: 'many-flows', w: 'c', n: 100000, unit: 'flow', run: manyFlows( 100000 ), rate: 'flows/s' },
    { name: 'parallel', w: 'd', n: 100000, unit: 'branch', run: parallel( 1000, 100 ) },
    { name: 'error', w: 'e', n: 200000, unit: 'error', run: error( 200000 ) },
    { name: 'mutex', w: 'f', n: 100000, unit: 'sync', run: mutex( 1000, 100 ) },
    { name: 'timers', w: 'g', n: 10000, unit: 'flow', run: timers( 10000 ) },
    { name: 'parked', w: 'h', n: 100000, unit: 'flow', memory: parked },
];

function parseArgs( argv ) {
    const opts = { minTime: 1, limit: 600, names: [] };
    for ( const a of argv ) {
        let m;
        if ( ( m = /^--min-time=([0-9.]+)$/.exec( a ) ) ) {
            opts.minTime = Number( m[1] );
        } else if ( ( m = /^--limit=([0-9.]+)$/.exec( a ) ) ) {
            opts.limit = Number( m[1] );
        } else if ( a === '--list' ) {
            opts.list = true;
        } else if ( a.startsWith( '-' ) ) {
            throw new Error( `unknown option ${a}` );
        } else {
            opts.names.push( a );
        }
    }
    return opts;
}

async function timed( wl, opts ) {
    const limitMs = opts.limit * 1000;
    const minMs = opts.minTime * 1000;
    // One warm-up run for the JIT, unless one run is already long.
    let total = 0;
    let runs = 0;
    let warm = false;
    for ( ;; ) {
        const start = performance.now();
        const res = await wl.run( { deadline: start + limitMs } );
        const ms = performance.now() - start;
        if ( res && res.done !== undefined ) {
            return {
                value: ms * 1e6 / wl.n,
                runs: 1,
                lower_bound: true,
                done: res.done,
                elapsed_s: ms / 1000,
            };
        }
        if ( !warm && ms < minMs / 4 ) {
            warm = true;
            continue;
        }
        total += ms;
        runs++;
        if ( total >= minMs ) {
            break;
        }
    }
    return { value: total * 1e6 / runs / wl.n, runs, lower_bound: false };
}

async function main() {
    const opts = parseArgs( process.argv.slice( 2 ) );
    if ( opts.list ) {
        for ( const wl of WORKLOADS ) {
            process.stdout.write( `${wl.name}${wl.slow ? ' (slow)' : ''}\n` );
        }
        return;
    }
    let selected;
    if ( opts.names.length ) {
        selected = opts.names.map( ( name ) => {
            const wl = WORKLOADS.find( ( w ) => w.name === name );
            if ( !wl ) {
                throw new Error( `unknown workload ${name}` );
            }
            return wl;
        } );
    } else {
        selected = WORKLOADS.filter( ( w ) => !w.slow );
    }
    let current = null;
    process.on( 'beforeExit', () => {
        if ( current !== null ) {
            process.stderr.write( `workloads.js: ${current}: a flow stopped before its end\n` );
            process.exitCode = 1;
        }
    } );
    for ( const wl of selected ) {
        current = wl.name;
        const line = {
            workload: wl.w,
            name: wl.name,
            n: wl.n,
            unit: wl.unit,
        };
        if ( wl.memory ) {
            Object.assign( line, { metric: `B/${wl.unit}`, runs: 1, lower_bound: false },
                await wl.memory( wl.n ) );
        } else {
            const r = await timed( wl, opts );
            line.metric = `ns/${wl.unit}`;
            Object.assign( line, r );
            if ( wl.rate ) {
                line[wl.rate] = 1e9 / r.value;
            }
        }
        process.stdout.write( JSON.stringify( line ) + '\n' );
        current = null;
        if ( global.gc ) {
            global.gc();
        }
    }
}

main().catch( ( e ) => {
    process.stderr.write( `workloads.js: ${e.stack || e}\n` );
    process.exit( 1 );
} );
