/*
 * The outbox of one event, for spin (docs/correctness.md). The event commits with its record (one transaction, so
 * it exists exactly when the record says the operation succeeded); the relay sends it to an at-least-once queue
 * (it may send it again: a crash between the send and marking it sent, the sweep); the queue delivers a copy again
 * when a consumer does not delete it; two consumers take deliveries concurrently. A consumer claims the event with
 * a lease and an owner token, makes the effect (passing the event id), then settles the claim and the event in one
 * fenced write and deletes the message. A delivery that finds a claim whose lease passed takes it over and first
 * asks the downstream by event id; only a confirmed absence runs the effect again.
 *
 * Bounds: DUPS extra sends by the relay, CRASHES consumer crashes, SLOW leases that pass while their consumer lives.
 * Planted bug: -DPLANT_NO_CONSUMER_DEDUP (the consumer makes the effect on every delivery).
 */
#ifndef DUPS
#define DUPS 1
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef SLOW
#define SLOW 1
#endif

bit committed;   /* the event committed with its record */
bit sent;        /* the relay marked it sent */
byte q;          /* copies in the queue (visible or in flight) */
byte applied;    /* effects the downstream made for the event */
bit ev_done;     /* the event is settled */
byte claim_own;  /* owner token of the delivery claim, 0 when none */
bit claim_lease; /* the claim's lease has not passed */
byte ntok;
byte exec_tok[2];
bit mylease[2];
bit crash_req[2];

byte dup_b = DUPS;
byte crash_b = CRASHES;
byte slow_b = SLOW;

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

/* Time: a claim's lease passes (at once when its consumer is gone; SLOW times while it lives). */
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

proctype Consumer(byte me) {
  byte t;
  bit holding, takeover, go;
end:
  do
  :: {
       atomic { q > 0 -> q--; holding = 1; go = 0; takeover = 0; printf("TRAIL %d receive\n", _pid) };
#ifdef PLANT_NO_CONSUMER_DEDUP
       atomic { EFFECT() };
       atomic { ev_done = 1; holding = 0 }
#else
       atomic {
         if
         :: ev_done -> holding = 0                                  /* settled before: delete the copy */
         :: !ev_done && claim_own == 0 ->
            ntok++; t = ntok * 2 + me; claim_own = t; claim_lease = 1; exec_tok[me] = t; mylease[me] = 1; go = 1
         :: !ev_done && claim_own != 0 && !claim_lease ->
            ntok++; t = ntok * 2 + me; claim_own = t; claim_lease = 1; exec_tok[me] = t; mylease[me] = 1; go = 1;
            takeover = 1
         :: !ev_done && claim_own != 0 && claim_lease -> holding = 0; q++  /* claimed by a live delivery: visible again later */
         fi
       };
       if
       :: go ->
          atomic {
            if
            :: !mylease[me] -> skip                     /* no budget left: the claim passes to a later delivery */
            :: mylease[me] && takeover && applied > 0 -> skip   /* asked by event id: found */
            :: mylease[me] && !(takeover && applied > 0) -> EFFECT()
            fi
          };
          atomic {
            if
            :: claim_own == t && mylease[me] -> ev_done = 1; holding = 0; printf("TRAIL %d settle\n", _pid)
            :: claim_own == t && !mylease[me] && applied > 0 -> ev_done = 1; holding = 0; printf("TRAIL %d settle\n", _pid)
            :: !(claim_own == t && (mylease[me] || applied > 0)) -> holding = 0; q++   /* fenced out or no budget: redelivered */
            fi;
            exec_tok[me] = 0; mylease[me] = 0
          }
       :: else
       fi
#endif
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
    run Writer();
    run Relay();
    run Clock();
    run Consumer(0);
    run Consumer(1);
    run Crasher()
  }
}
