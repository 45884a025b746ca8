/*
 * The outbox of one event, for spin (docs/correctness.md). The event commits with its record (one transaction, so
 * it exists exactly when the record says the operation succeeded); the relay sends it to an at-least-once queue
 * (it may send it again: a crash between the send and marking it sent, the sweep); the queue delivers a copy again
 * when a consumer does not delete it; two consumers take deliveries concurrently. A consumer claims the event with
 * a lease and an owner token, calls the downstream (passing the event id), then settles the claim and the event in
 * one fenced write and deletes the message. A delivery that finds a claim whose lease passed takes it over and first
 * asks the downstream by event id (`verify`): found settles; nothing found inside the in-flight window of the claim,
 * or a lookup that fails, defers (the claim stays, the message comes back); only nothing found once the window
 * passed runs the delivery again. `deliver` is never called on a guess.
 *
 * The downstream request, once sent, may land at any later step until the claim's window has passed, whatever
 * happened to its consumer (timed out, crashed, fenced out).
 *
 * Run-time parameters (SPIN_<NAME> in pan's environment, test/models/spin.ts): DUPS extra sends by the relay, CRASHES
 * consumer crashes, SLOW leases that pass while their consumer lives, FAULTS downstream timeouts (the request left on
 * the wire) and failed lookups; the planted bugs PLANT_NO_CONSUMER_DEDUP (the consumer delivers on every copy) and
 * PLANT_VERIFY_IN_WINDOW (a lookup inside the window taken as a confirmed absence).
 */
c_decl {
  static int param(const char *name, int dflt) { const char *v = getenv(name); return v ? atoi(v) : dflt; }
}

hidden byte DUPS = 1;
hidden byte CRASHES = 1;
hidden byte SLOW = 1;
hidden byte FAULTS = 1;
hidden byte PLANT_NO_CONSUMER_DEDUP, PLANT_VERIFY_IN_WINDOW;

bit committed;   /* the event committed with its record */
bit sent;        /* the relay marked it sent */
byte q;          /* copies in the queue (visible or in flight) */
byte applied;    /* effects the downstream made for the event */
bit ev_done;     /* the event is settled */
byte claim_own;  /* owner token of the delivery claim, 0 when none */
bit claim_lease; /* the claim's lease has not passed */
bit win;         /* a request on the wire, or its in-flight window, has not passed: it may still land */
byte fly;        /* requests on the wire: sent, not landed, may still land */
byte exec_tok[2];
bit mylease[2];
bit crash_req[2];

byte dup_b;
byte crash_b;
byte slow_b;
byte fault_b;


inline EFFECT() {
  printf("TRAIL %d effect\n", _pid);
  applied++;
  assert(applied <= 1)   /* each queued event takes effect once */
}

/* The record's transaction: the operation's record and its event commit together. */
proctype Writer() {
  atomic { committed = 1; printf("TRAIL %d commit\n", _pid) }
}

proctype Relay() {
end:
  do
  :: atomic { committed && !sent -> q++; sent = 1; printf("TRAIL %d send\n", _pid) }
  :: atomic { committed && !ev_done && dup_b > 0 -> dup_b--; q++; printf("TRAIL %d send_again\n", _pid) }
  od
}

/* Time: a claim's lease passes (at once when its consumer is gone; SLOW times while it lives). The wire: a request
   on it lands; the in-flight window of what is on it passes (what has not landed by then never does; each send opens
   it again). */
proctype Clock() {
end:
  do
  :: atomic {
       claim_own != 0 && claim_lease && !ev_done && (exec_tok[claim_own % 2] != claim_own || slow_b > 0) ->
       if
       :: exec_tok[claim_own % 2] == claim_own -> slow_b--; mylease[claim_own % 2] = 0
       :: else
       fi;
       claim_lease = 0; printf("TRAIL %d lease_passed\n", _pid)
     }
  od
}

/* The wire, apart from the clock so that weak fairness holds for it on its own (a clock passing leases for ever
   must not keep the window from passing). */
proctype Wire() {
end:
  do
  :: atomic { fly > 0 -> fly--; EFFECT() }
  :: atomic { win -> win = 0; fly = 0; printf("TRAIL %d window_passed\n", _pid) }
  od
}

/* A fresh owner token: 2 * serial + consumer, the serial unlike the claim's (tokens are only compared with the
   claim's owner and the consumer's own attempt, so this fences as a never-used one would, with finite states). */
inline NEW_TOKEN() {
  t = 2 + me;
  if :: t == claim_own -> t = 4 + me :: else fi
}

inline HOLD() {
  NEW_TOKEN(); claim_own = t; claim_lease = 1; exec_tok[me] = t; mylease[me] = 1; go = 1
}

proctype Consumer(byte me) {
  byte t;
  bit holding, takeover, go, sure;
end:
  do
  :: /* Each step below is one request (the queue, the store, the downstream); the consumer's choices between them
        (on its own variables) are no steps of their own: a goto out of an atomic sequence ends it. */
     {
       atomic {
         q > 0 -> q--; holding = 1; go = 0; takeover = 0; sure = 0; printf("TRAIL %d receive\n", _pid);
         if :: PLANT_NO_CONSUMER_DEDUP -> goto no_dedup :: else -> goto claim fi
       };
no_dedup:
       atomic { EFFECT() };
       atomic { ev_done = 1; holding = 0; goto end };
claim:
       atomic {
         if
         :: ev_done -> holding = 0                                  /* settled before: delete the copy */
         :: !ev_done && claim_own == 0 -> HOLD()
         :: !ev_done && claim_own != 0 && !claim_lease -> HOLD(); takeover = 1
         :: !ev_done && claim_own != 0 && claim_lease -> holding = 0; q++  /* claimed by a live delivery: visible again later */
         fi;
         if :: go && takeover -> goto verify :: go && !takeover -> goto deliver :: else -> goto end fi
       };
verify:
       /* A takeover asks the downstream by event id first. */
       atomic {
         if
         :: applied > 0 -> sure = 1; printf("TRAIL %d verify_found\n", _pid)
         :: applied == 0 && fault_b > 0 ->
            fault_b--; go = 0; printf("TRAIL %d verify_failed\n", _pid)         /* defer */
         :: applied == 0 && win && !PLANT_VERIFY_IN_WINDOW ->
            go = 0; printf("TRAIL %d verify_in_window\n", _pid)                 /* nothing found yet: defer */
         :: applied == 0 && (!win || PLANT_VERIFY_IN_WINDOW) ->
            printf("TRAIL %d verify_absent\n", _pid)                            /* confirmed absent */
         fi;
         if :: go -> goto deliver :: else -> goto later fi
       };
later:
       atomic { holding = 0; q++; exec_tok[me] = 0; mylease[me] = 0; goto end };   /* the claim stays: later */
deliver:
       atomic {
         if
         :: sure -> skip
         :: !sure && !mylease[me] -> skip                      /* no budget left: nothing sent */
         :: !sure && mylease[me] ->
            if
            :: EFFECT(); sure = 1
            :: fault_b > 0 -> fault_b--; fly++; win = 1; printf("TRAIL %d on_the_wire\n", _pid)  /* timed out */
            :: slow_b > 0 && claim_own == t ->                  /* our deadline and lease pass while it is on the wire */
               slow_b--; fly++; win = 1; mylease[me] = 0; claim_lease = 0; printf("TRAIL %d on_the_wire\n", _pid); printf("TRAIL %d lease_passed\n", _pid)
            :: crash_b > 0 -> crash_b--; fly++; win = 1; printf("TRAIL %d on_the_wire\n", _pid); crash_req[me] = 1
            fi
         fi
       };
       atomic {
         if
         :: claim_own == t && sure -> ev_done = 1; holding = 0; printf("TRAIL %d settle\n", _pid)
         :: !(claim_own == t && sure) -> holding = 0; q++   /* fenced out, not sure or no budget: redelivered */
         fi;
         exec_tok[me] = 0; mylease[me] = 0;
         goto end
       }
     } unless {
       crash_req[me] ->
       atomic {
         printf("TRAIL %d crash\n", _pid);
         crash_req[me] = 0; exec_tok[me] = 0; mylease[me] = 0;
         if :: holding -> holding = 0; q++ :: else fi   /* not deleted: the queue delivers it again */
       }
     }
  od
}

proctype Crasher() {
end:
  do
  :: atomic { crash_b > 0 && !crash_req[0] -> crash_req[0] = 1; crash_b-- }
  :: atomic { crash_b > 0 && !crash_req[1] -> crash_req[1] = 1; crash_b-- }
  od
}

/* Progress under weak fairness: the event takes effect and is settled. */
ltl progress { <> [] (applied == 1 && ev_done) }

init {
  atomic {
    c_code {
      DUPS = param("SPIN_DUPS", DUPS); CRASHES = param("SPIN_CRASHES", CRASHES); SLOW = param("SPIN_SLOW", SLOW);
      FAULTS = param("SPIN_FAULTS", FAULTS);
      PLANT_NO_CONSUMER_DEDUP = param("SPIN_PLANT_NO_CONSUMER_DEDUP", 0);
      PLANT_VERIFY_IN_WINDOW = param("SPIN_PLANT_VERIFY_IN_WINDOW", 0);
    };
    dup_b = DUPS; crash_b = CRASHES; slow_b = SLOW; fault_b = FAULTS;
    run Writer();
    run Relay();
    run Clock();
    run Consumer(0);
    run Consumer(1);
    run Crasher();
    run Wire()
  }
}
