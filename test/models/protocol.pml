/*
 * The idempotency protocol of one key, for spin (docs/correctness.md explains what is modelled and what is not).
 *
 * Actors: three callers with one key (callers 0 and 1 send the same arguments, caller 2 other ones), each retrying
 * with the key until it has a final answer; the store (one record per key, every write one atomic conditional write);
 * the downstream (deduplicating by our key when KIND == 0, not when KIND == 1; KIND == 2 is a local tool: its effect
 * is the items committed with the record, on the one-request path); the clock (lease expiry, retention expiry);
 * the reconciler; a person (the operator's fenced settle); a crasher that kills a caller at any step.
 *
 * Every store write goes through WRITE(k, event): the next state comes from the code's own table
 * (generated/transitions.pml, emitted from lambdas/core/state-machine.ts), and a move the table does not have fails.
 *
 * A downstream request, once sent, may land (apply its effect) at any later step until the in-flight window of the
 * claim it was sent under has passed, whatever happened to its caller (timed out, crashed, fenced out); a lookup that
 * finds nothing inside that window proves nothing, so the reconciler (and the operator's `absent`) waits for it.
 * The downstream remembers a key (dedup and lookup) at least until its record is settled and its window passed.
 *
 * Run-time parameters (test/models/spin.ts sets SPIN_<NAME> in pan's environment; one compiled pan serves every profile):
 * KIND, the bounds CRASHES crashes, FAULTS faults (downstream, store, lost responses), SLOW leases that pass while
 * their executor still lives, OPS decisions of the operator, EXPIRES retention expiries, FORGETS ends of the
 * downstream's memory of a key; and the planted bugs and findings (docs/correctness.md), each a flag at 1.
 */
#include "generated/transitions.pml"

c_decl {
  /* A run-time parameter: SPIN_<name> from the environment, else its default. */
  static int param(const char *name, int dflt) { const char *v = getenv(name); return v ? atoi(v) : dflt; }
}

/* Run-time parameters, set once by init from the environment. Hidden: constant after that, no part of the state. */
hidden byte KIND = 0;
hidden byte CRASHES = 1;
hidden byte FAULTS = 1;
hidden byte SLOW = 1;
hidden byte OPS = 1;
hidden byte EXPIRES = 1;
hidden byte FORGETS = 0;
hidden byte PLANT_NO_FENCE, PLANT_RELEASE_NOT_HELD, PLANT_MUTATED_ARGS, PLANT_NO_DEADLINE, PLANT_RECONCILE_LIVE_LEASE,
  PLANT_NEW_KEY_ON_UNKNOWN, PLANT_ABSENT_IN_WINDOW, PLANT_TAKEOVER_IN_WINDOW, PLANT_SHORT_MEMORY,
  FINDING_REPLAY_OTHER_ARGS, FINDING_RELEASE_AFTER_TAKEOVER;

inline READ_PARAMETERS() {
  c_code {
    KIND = param("SPIN_KIND", KIND); CRASHES = param("SPIN_CRASHES", CRASHES); FAULTS = param("SPIN_FAULTS", FAULTS);
    SLOW = param("SPIN_SLOW", SLOW); OPS = param("SPIN_OPS", OPS); EXPIRES = param("SPIN_EXPIRES", EXPIRES);
    FORGETS = param("SPIN_FORGETS", FORGETS);
    PLANT_NO_FENCE = param("SPIN_PLANT_NO_FENCE", 0); PLANT_RELEASE_NOT_HELD = param("SPIN_PLANT_RELEASE_NOT_HELD", 0);
    PLANT_MUTATED_ARGS = param("SPIN_PLANT_MUTATED_ARGS", 0); PLANT_NO_DEADLINE = param("SPIN_PLANT_NO_DEADLINE", 0);
    PLANT_RECONCILE_LIVE_LEASE = param("SPIN_PLANT_RECONCILE_LIVE_LEASE", 0);
    PLANT_NEW_KEY_ON_UNKNOWN = param("SPIN_PLANT_NEW_KEY_ON_UNKNOWN", 0);
    PLANT_ABSENT_IN_WINDOW = param("SPIN_PLANT_ABSENT_IN_WINDOW", 0);
    PLANT_TAKEOVER_IN_WINDOW = param("SPIN_PLANT_TAKEOVER_IN_WINDOW", 0);
    PLANT_SHORT_MEMORY = param("SPIN_PLANT_SHORT_MEMORY", 0);
    FINDING_REPLAY_OTHER_ARGS = param("SPIN_FINDING_REPLAY_OTHER_ARGS", 0);
    FINDING_RELEASE_AFTER_TAKEOVER = param("SPIN_FINDING_RELEASE_AFTER_TAKEOVER", 0);
  }
}

/* Reconcile checks before a record is parked for a person. */
#define MAXATT 2

#define DEDUP (KIND == 0)
#define LOCAL (KIND == 2)
/* The tool's policy reexecuteSafe: a stale PROCESSING record is taken over rather than marked UNKNOWN. */
#define REEXEC (KIND != 1)

#define NC 3
#define NK 2

/* Answers. The final ones end a caller's intent; the others make it call again with the same key. */
#define A_NONE 0
#define A_SUCCEEDED 1
#define A_FAILED 2
#define A_CONFLICT 3
#define A_REVIEW 4
#define A_UNKNOWN 5
#define A_IN_PROGRESS 6
#define A_TRANSIENT 7
#define FINAL(a) ((a) >= A_SUCCEEDED && (a) <= A_REVIEW)

/* Outcomes of one execution. */
#define O_OK 1
#define O_TERMINAL 2
#define O_TRANSIENT 3
#define O_UNCERTAIN 4

typedef Rec {
  byte st;
  byte own;   /* owner token: serial * 4 + caller */
  bit fp;     /* fingerprint of the arguments it was claimed with */
  byte res;   /* result id */
  byte att;   /* reconcile attempts */
  bit lease   /* the lease has not passed */
};
Rec rec[NK];

byte nres;          /* result serial */
bit res_fp[16];     /* which arguments a result was produced for */

/* The downstream's (or the local items') truth, per key, in the key's current retention period. */
byte eff_cnt[NK];
byte eff_res[NK];
int eff_mask;       /* every result id that exists as an effect */
byte eff_int[2];    /* effects per intent (arguments), in the current retention period */
byte succ_res[NK];  /* the result of the first succeeded answer per key, in the current retention period */
byte fly[4];        /* requests on the wire, by key * 2 + arguments: sent, not landed, may still land */
bit win[NK];        /* a request on the wire to the key, or its in-flight window, has not passed: it may still land */
bit forgot[NK];     /* the downstream's memory of the key ended (its dedup and its lookup no longer see the effect) */

/* What the downstream sees of a key: its dedup and its lookup by key. */
#define SEEN(kk) (eff_cnt[kk] > 0 && !forgot[kk])

/* Callers as the clock and the crasher see them. */
byte exec_tok[NC];  /* the token a caller executes under, 0 when not executing */
bit mylease[NC];    /* the executing caller's own deadline has not passed */
bit crash_req[NC];
bit done[NC];

byte crash_b;
byte fault_b;
byte slow_b;
byte op_b;
byte exp_b;
byte forget_b;
bit absent_fail;    /* the tool's policy for a confirmed absence: fail (1) or release the key (0) */

#define OWNER(kk) (rec[kk].own % 4)
#define OWNER_ALIVE(kk) (exec_tok[OWNER(kk)] == rec[kk].own)

inline WRITE(kk, ev) {
  printf("TRAIL %d write %d %d %d %d\n", _pid, kk, ev, rec[kk].st, NEXT(rec[kk].st, ev));
  assert(NEXT(rec[kk].st, ev) != ST_NONE);   /* no store transition outside the code's table */
  rec[kk].st = NEXT(rec[kk].st, ev);
  if
  :: rec[kk].st == ST_ABSENT -> rec[kk].own = 0; rec[kk].fp = 0; rec[kk].res = 0; rec[kk].att = 0; rec[kk].lease = 0
  :: else -> skip
  fi
}

inline EFFECT(kk, r) {
  printf("TRAIL %d effect %d %d\n", _pid, kk, r);
  assert(rec[kk].st != ST_FAILED);  /* a record that says the operation failed has no effect */
  eff_cnt[kk]++; eff_res[kk] = r; eff_mask = eff_mask | (1 << r); eff_int[res_fp[r]]++;
  assert(eff_cnt[kk] <= 1);        /* at most one effect per key */
  assert(eff_int[res_fp[r]] <= 1)  /* at most one effect per intent (a client that changes the key) */
}

inline NEW_RESULT() {
  nres++; assert(nres < 16); r = nres; res_fp[r] = myfp
}

/* The request leaves on the wire without an answer: it may land later (Clock), until its window passes. */
inline ON_THE_WIRE() {
  printf("TRAIL %d on_the_wire %d\n", _pid, k);
  fly[k * 2 + myfp]++; win[k] = 1
}

/* A fresh owner token: serial * 4 + caller, the smallest serial no record holds. A token is only ever compared with
   a record's owner and with the token of the caller's current attempt (a caller runs one attempt at a time, and a
   crashed attempt is gone), so one unlike every record's owner fences exactly as a never-used one would; unlike a
   growing counter it keeps the state space finite, so a caller that polls or re-claims forever is a cycle of states
   (caught by the progress check), not a bound the search runs into. */
inline NEW_TOKEN() {
  t = 1 * 4 + me;
  if :: t == rec[0].own || t == rec[1].own -> t = 2 * 4 + me :: else fi;
  if :: t == rec[0].own || t == rec[1].own -> t = 3 * 4 + me :: else fi
}

inline ANSWER_SUCCEEDED(rr) {
  assert(rr != 0 && (eff_mask & (1 << rr)) != 0);  /* no succeeded answer without its effect */
  assert(res_fp[rr] == myfp);                       /* the result of this caller's own arguments */
  if
  :: succ_res[k] == 0 -> succ_res[k] = rr
  :: else -> assert(succ_res[k] == rr)              /* every succeeded answer for a key carries the same result */
  fi;
  out = A_SUCCEEDED
}

/* "Failed": the operation did not happen. A lie once an effect exists. */
inline ANSWER_FAILED() {
  assert(eff_cnt[k] == 0);
  out = A_FAILED
}

/* "Failed, retry: nothing ran". */
inline ANSWER_TRANSIENT() {
  assert(eff_cnt[k] == 0);
  out = A_TRANSIENT
}

/* answerFromRecord: what the record says now (after our own fenced write was refused, or after a store error). */
inline ANSWER_FROM_RECORD() {
  if
  :: !FINDING_REPLAY_OTHER_ARGS && rec[k].st != ST_ABSENT && rec[k].fp != myfp -> out = A_CONFLICT   /* the key now holds other arguments */
  :: else ->
     if
     :: rec[k].st == ST_SUCCEEDED -> ANSWER_SUCCEEDED(rec[k].res)
     :: rec[k].st == ST_FAILED -> ANSWER_FAILED()
     :: rec[k].st == ST_PROCESSING -> out = A_IN_PROGRESS
     :: rec[k].st == ST_NEEDS_REVIEW -> out = A_REVIEW
     :: rec[k].st == ST_UNKNOWN || rec[k].st == ST_ABSENT -> out = A_UNKNOWN
     fi
  fi
}

/* PLANT_NO_DEADLINE: an in-progress record without a deadline taken as orphaned. */
#define SEES_LIVE_LEASE (rec[k].lease && !PLANT_NO_DEADLINE)

/* A claim or takeover: ours, with a fresh lease. */
inline HOLD() {
  rec[k].own = t; rec[k].lease = 1;
  exec_tok[me] = t; mylease[me] = 1; go = 1
}

/* decideForExisting on a record we do not own, in the same atomic step as the read (the write after it is fenced
   on what was read, so a refused fence is the same as the other actor's step coming first). */
inline FOLLOW() {
  if
  :: rec[k].fp != myfp -> out = A_CONFLICT
  :: else ->
     if
     :: rec[k].st == ST_SUCCEEDED -> ANSWER_SUCCEEDED(rec[k].res)
     :: rec[k].st == ST_FAILED -> ANSWER_FAILED()
     :: rec[k].st == ST_UNKNOWN -> out = A_UNKNOWN
     :: rec[k].st == ST_NEEDS_REVIEW -> out = A_REVIEW
     :: rec[k].st == ST_PROCESSING && SEES_LIVE_LEASE ->
        if :: PLANT_RELEASE_NOT_HELD -> WRITE(k, EV_RELEASE) :: else fi;   /* the error path deletes a lock this call does not hold */
        out = A_IN_PROGRESS
     :: rec[k].st == ST_PROCESSING && !SEES_LIVE_LEASE && REEXEC ->
        NEW_TOKEN(); WRITE(k, EV_TAKE_OVER); HOLD(); tk = 1
     :: rec[k].st == ST_PROCESSING && !SEES_LIVE_LEASE && !REEXEC && PLANT_TAKEOVER_IN_WINDOW && !SEEN(k) ->
        /* the takeover asks the downstream, hears nothing inside the window and takes that as absent: runs again */
        NEW_TOKEN(); WRITE(k, EV_TAKE_OVER); HOLD(); tk = 1
     :: rec[k].st == ST_PROCESSING && !SEES_LIVE_LEASE && !REEXEC ->
        WRITE(k, EV_LEASE_EXPIRED); rec[k].lease = 0; rec[k].att = 0; out = A_UNKNOWN
     fi
  fi
}

inline CLAIM() {
  NEW_TOKEN(); WRITE(k, EV_CLAIM); rec[k].fp = myfp; rec[k].att = 0; HOLD()
}

#define FENCED (rec[k].st == ST_PROCESSING && rec[k].own == t)

/* PLANT_MUTATED_ARGS: the completion is keyed by arguments the handler changed after the claim (and so unfenced);
   PLANT_NO_FENCE: completion without the owner fence. */
#define SK (PLANT_MUTATED_ARGS -> 1 - k : k)
#define SETTLE_FENCE (PLANT_MUTATED_ARGS || PLANT_NO_FENCE || FENCED)

/* The settle write: PROCESSING (ours) -> SUCCEEDED / FAILED; a local tool's items commit with it. */
inline SETTLE_APPLY() {
  if
  :: o == O_OK -> if :: LOCAL -> NEW_RESULT() :: else fi; WRITE(SK, EV_COMPLETE); rec[SK].res = r; if :: LOCAL -> EFFECT(SK, r) :: else -> skip fi
  :: o == O_TERMINAL -> WRITE(SK, EV_FAIL)
  fi;
  rec[SK].lease = 0
}

/* markUnknownOrRead: PROCESSING (ours) -> UNKNOWN, else answer from the record. */
inline MARK_UNKNOWN_OR_READ(ev) {
  if
  :: fault_b > 0 -> fault_b--; out = A_UNKNOWN   /* the store is down: left PROCESSING until its lease passes */
  :: FENCED -> WRITE(k, ev); rec[k].lease = 0; rec[k].att = 0; out = A_UNKNOWN
  :: !FENCED -> ANSWER_FROM_RECORD()
  fi
}

proctype Caller(byte me; bit myfp) {
  byte k = 0;        /* which key: 0, or 1 for a client that changes it */
  byte t, r, o, out;
  bit go, unsure;
  bit tk;            /* this execution took the key over from a vanished executor */

  do
  :: {
       /* The first store request of an attempt, with the attempt's local reset and choices in the same step (steps
          that touch only the caller's own variables are not interleaving points of their own). */
       atomic {
         out = A_NONE; go = 0; unsure = 0; t = 0; o = 0; tk = 0;
         if
         :: LOCAL && rec[k].st == ST_ABSENT ->
            /* The one-request path: execute first (nothing outside), then commit the settled record and the items
               in one request on the condition that the key is free. */
            if :: o = O_OK :: o = O_TERMINAL fi;   /* its result gets an id when it commits */
            NEW_TOKEN();
            assert(NEXT(NEXT(ST_ABSENT, EV_CLAIM), EV_COMPLETE) == ST_SUCCEEDED && NEXT(NEXT(ST_ABSENT, EV_CLAIM), EV_FAIL) == ST_FAILED);
            if
            :: fault_b > 0 -> fault_b--; unsure = 1    /* store unavailable: the commit may or may not apply */
            :: true
            fi;
            if
            :: unsure -> skip                           /* not applied */
            :: true ->
               NEW_RESULT(); rec[k].own = t; rec[k].fp = myfp; rec[k].res = r;
               printf("TRAIL %d commit_once %d %d\n", _pid, k, o);
               if
               :: o == O_OK -> rec[k].st = ST_SUCCEEDED; EFFECT(k, r); if :: !unsure -> ANSWER_SUCCEEDED(r) :: else fi
               :: o == O_TERMINAL -> rec[k].st = ST_FAILED; rec[k].res = 0; if :: !unsure -> ANSWER_FAILED() :: else fi
               fi
            fi
         :: !LOCAL && rec[k].st == ST_ABSENT -> CLAIM()
         :: rec[k].st != ST_ABSENT -> FOLLOW()
         fi;
         /* Where the next step starts: a goto out of an atomic sequence ends it, so each store request stays a step
            of its own, and the caller's choices between them (on its own variables) are not. */
         if :: unsure -> goto again :: !unsure && go -> goto execute :: else -> goto answer fi
       };
again:
       /* A one-request commit not concluded: claim with the same token (finds our record if the commit applied). */
       atomic {
         if
         :: rec[k].st != ST_ABSENT && rec[k].own == t -> ANSWER_FROM_RECORD()
         :: rec[k].st == ST_ABSENT -> CLAIM()
         :: rec[k].st != ST_ABSENT && rec[k].own != t -> FOLLOW()
         fi;
         unsure = 0;
         if :: go -> goto execute :: else -> goto answer fi
       };
execute:
          /* Execute under the claim: a request to the downstream lands now, or stays on the wire (our deadline,
             a timeout or our crash ended the wait before it landed) and may land later. */
          atomic {
            if
            :: !mylease[me] -> o = O_TRANSIENT   /* no budget left: nothing sent */
            :: mylease[me] && LOCAL -> if :: o = O_OK :: o = O_TERMINAL fi
            :: mylease[me] && !LOCAL && DEDUP && SEEN(k) ->
               r = eff_res[k]; o = O_OK              /* the downstream dedups on our key: the first effect's result */
            :: mylease[me] && !LOCAL && !(DEDUP && SEEN(k)) ->
               if
               :: NEW_RESULT(); EFFECT(k, r); o = O_OK
               :: o = O_TERMINAL;                    /* refused for good: nothing happened */
                  if :: DEDUP -> fly[k * 2] = 0; fly[k * 2 + 1] = 0 :: else fi   /* it answers the key's requests so */
               :: fault_b > 0 -> fault_b--; NEW_RESULT(); EFFECT(k, r); o = O_UNCERTAIN  /* landed, answer lost */
               :: fault_b > 0 -> fault_b--; ON_THE_WIRE(); o = O_UNCERTAIN  /* timed out before it landed */
               :: fault_b > 0 -> fault_b--; o = O_TRANSIENT  /* refused, nothing happened */
               :: slow_b > 0 && FENCED ->            /* our deadline (and lease) passes while it is on the wire */
                  slow_b--; ON_THE_WIRE(); o = O_UNCERTAIN; mylease[me] = 0; rec[k].lease = 0;
                  printf("TRAIL %d lease_passed %d\n", _pid, k)
               :: crash_b > 0 -> crash_b--; ON_THE_WIRE(); crash_req[me] = 1   /* we crash while it is on the wire */
               fi
            fi
          };
          /* Settle, fenced by our owner token. */
          atomic {
            if
            :: o == O_OK || o == O_TERMINAL ->
               if
               :: SETTLE_FENCE ->
                  if
                  :: fault_b > 0 -> fault_b--; unsure = 1; if :: SETTLE_APPLY() :: skip fi
                  :: true -> SETTLE_APPLY(); if :: o == O_OK -> ANSWER_SUCCEEDED(r) :: else -> ANSWER_FAILED() fi
                  fi
               :: else -> ANSWER_FROM_RECORD()       /* fenced out: our writes did not commit */
               fi
            :: o == O_TRANSIENT && tk && !FINDING_RELEASE_AFTER_TAKEOVER -> MARK_UNKNOWN_OR_READ(EV_UNCERTAIN)  /* an earlier executor may have acted */
            :: o == O_TRANSIENT && (!tk || FINDING_RELEASE_AFTER_TAKEOVER) ->
               if
               :: FENCED -> WRITE(k, EV_RELEASE); ANSWER_TRANSIENT()
               :: !FENCED && rec[k].st == ST_ABSENT -> ANSWER_TRANSIENT()
               :: !FENCED && rec[k].st != ST_ABSENT -> ANSWER_FROM_RECORD()
               fi
            :: o == O_UNCERTAIN -> MARK_UNKNOWN_OR_READ(EV_UNCERTAIN)
            fi;
            if :: unsure -> goto mark :: else -> goto answer fi
          };
mark:
          atomic { MARK_UNKNOWN_OR_READ(EV_UNCERTAIN) };   /* the completion may or may not have applied */
answer:
       atomic {
         printf("TRAIL %d answer %d %d\n", _pid, k, out);
         exec_tok[me] = 0; mylease[me] = 0;
         if
         :: FINAL(out) && fault_b > 0 -> fault_b--; out = A_NONE    /* the answer is lost on the way back */
         :: FINAL(out) -> done[me] = 1
         :: !FINAL(out) ->
            if :: PLANT_NEW_KEY_ON_UNKNOWN && out == A_UNKNOWN -> k = 1 :: else fi  /* the client retries `unknown` with a new key */
         fi;
         if :: done[me] -> break :: else fi
       }
     } unless {
       crash_req[me] -> atomic { printf("TRAIL %d crash\n", _pid); crash_req[me] = 0; exec_tok[me] = 0; mylease[me] = 0 }
     }
  od
}

/* A request on the wire lands: an effect, unless a deduplicating downstream has already seen the key. */
inline LAND(i) {
  fly[i]--;
  if
  :: DEDUP && SEEN(i / 2) -> printf("TRAIL %d deduplicated %d\n", _pid, i / 2)
  :: else -> nres++; assert(nres < 16); r = nres; res_fp[r] = i % 2; EFFECT(i / 2, r)
  fi
}

/* Time and the wire: a lease passes (at once when its executor is gone; while it lives, SLOW times); a request on
   the wire lands; the in-flight window of what is on the wire passes (a request not landed by then never lands;
   each send opens it again); the downstream's memory of a key ends (FORGETS times, once the record is settled and its window
   passed); retention ends (EXPIRES times, after the window). */
proctype Clock() {
  byte r;
end:
  do
  :: atomic {
       rec[0].st == ST_PROCESSING && rec[0].lease && (!OWNER_ALIVE(0) || slow_b > 0) ->
       if
       :: OWNER_ALIVE(0) -> slow_b--; mylease[OWNER(0)] = 0
       :: else
       fi;
       rec[0].lease = 0;
       printf("TRAIL %d lease_passed 0\n", _pid)
     }
  :: atomic { fly[0] > 0 -> LAND(0) }
  :: atomic { fly[1] > 0 -> LAND(1) }
  :: atomic { fly[2] + fly[3] > 0 -> if :: fly[2] > 0 -> LAND(2) :: fly[3] > 0 -> LAND(3) fi }
  :: atomic {
       win[0] ->
       win[0] = 0; fly[0] = 0; fly[1] = 0; printf("TRAIL %d window_passed 0\n", _pid)
     }
  :: atomic {
       forget_b > 0 && !forgot[0] && eff_cnt[0] > 0 &&
       (PLANT_SHORT_MEMORY || (rec[0].st == ST_SUCCEEDED && !win[0])) ->
       forget_b--; forgot[0] = 1; printf("TRAIL %d forgets 0\n", _pid)
     }
  :: atomic {
       exp_b > 0 && (rec[0].st == ST_SUCCEEDED || rec[0].st == ST_FAILED) && !win[0] ->
       exp_b--; WRITE(0, EV_EXPIRE);
       /* a new retention period of the key */
       eff_cnt[0] = 0; eff_res[0] = 0; eff_int[0] = 0; eff_int[1] = 0; succ_res[0] = 0; forgot[0] = 0
     }
  od
}

/* PLANT_RECONCILE_LIVE_LEASE: the reconciler settles records whose first call's lease still runs. */
#define STALE(kk) (PLANT_RECONCILE_LIVE_LEASE || !rec[kk].lease)
/* A lookup's "nothing found" decides only once the window passed (PLANT_ABSENT_IN_WINDOW: at once). */
#define DECIDABLE(kk) (!win[kk] || PLANT_ABSENT_IN_WINDOW)

/* The reconciler: one fenced transition per look; a look abandoned by a crash writes nothing. */
proctype Reconciler() {
end:
  do
  :: atomic {
       rec[0].st == ST_UNKNOWN ->
       if
       :: SEEN(0) -> WRITE(0, EV_RECONCILED_FOUND); rec[0].res = eff_res[0]
       :: !SEEN(0) && DECIDABLE(0) && absent_fail -> WRITE(0, EV_RECONCILED_ABSENT_FAIL)
       :: !SEEN(0) && DECIDABLE(0) && !absent_fail -> WRITE(0, EV_RECONCILED_ABSENT)
       :: !DECIDABLE(0) -> WRITE(0, EV_RECONCILE_DEFERRED)   /* nothing found or unreachable inside the window: wait, not an attempt */
       :: DECIDABLE(0) && rec[0].att + 1 >= MAXATT -> WRITE(0, EV_RECONCILE_EXHAUSTED)           /* unreachable, attempts spent */
       :: DECIDABLE(0) && rec[0].att + 1 < MAXATT -> WRITE(0, EV_RECONCILE_DEFERRED); rec[0].att++  /* unreachable */
       fi
     }
  :: atomic { rec[0].st == ST_PROCESSING && STALE(0) -> WRITE(0, EV_LEASE_EXPIRED); rec[0].att = 0 }
  od
}

/* A person verifies by hand and settles with a decision fenced on what they read; "absent" only once the window
   passed (before it, what they see proves nothing). */
proctype Operator() {
end:
  do
  :: atomic {
       op_b > 0 && (rec[0].st == ST_UNKNOWN || rec[0].st == ST_NEEDS_REVIEW) ->
       op_b--;
       if
       :: SEEN(0) -> WRITE(0, EV_OPERATOR_SETTLED_FOUND); rec[0].res = eff_res[0]
       :: !SEEN(0) && !win[0] && absent_fail -> WRITE(0, EV_OPERATOR_SETTLED_ABSENT_FAIL)
       :: !SEEN(0) && !win[0] && !absent_fail -> WRITE(0, EV_OPERATOR_SETTLED_ABSENT)
       :: WRITE(0, EV_OPERATOR_RECHECK); rec[0].att = 0
       fi
     }
  od
}

/* Kills a caller (its Lambda) at any step; the client calls again with the same key. */
proctype Crasher() {
end:
  do
  :: atomic { crash_b > 0 && !done[0] && !crash_req[0] -> crash_req[0] = 1; crash_b-- }
  :: atomic { crash_b > 0 && !done[1] && !crash_req[1] -> crash_req[1] = 1; crash_b-- }
  :: atomic { crash_b > 0 && !done[2] && !crash_req[2] -> crash_req[2] = 1; crash_b-- }
  od
}

#define QUIET (done[0] && done[1] && done[2] && rec[0].st != ST_PROCESSING && rec[0].st != ST_UNKNOWN)
/* Progress under weak fairness: every intent ends with a final answer (or a record parked for a person, which
   answers review_required), and nothing stays PROCESSING or UNKNOWN forever. */
ltl progress { <> [] QUIET }

init {
  atomic {
    READ_PARAMETERS();
    crash_b = CRASHES; fault_b = FAULTS; slow_b = SLOW; op_b = OPS; exp_b = EXPIRES; forget_b = FORGETS;
    TRANSITION_TABLE_INIT();
    if :: absent_fail = 0 :: absent_fail = 1 fi;
    run Caller(0, 0);
    run Caller(1, 0);
    run Caller(2, 1);
    run Clock();
    run Reconciler();
    /* Only with their bounds: a process that can never move still multiplies the weak-fairness search. */
    if :: OPS > 0 -> run Operator() :: else fi;
    if :: CRASHES > 0 -> run Crasher() :: else fi
  }
}
