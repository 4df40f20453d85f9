/*
 * rep_pause.c: pause and resume of one topic's replication, on every output
 * that carries it (replicator.h, rep_engine_pause; RELOAD.md 6.3).
 *
 * The flag is the lane's (an atomic: the admin API sets it on the loop
 * thread, the output's thread reads it in its pump); the lane's kick is the
 * command that carries it to the output's thread: the kind's lane_kicked
 * runs its pump, which with the flag set builds and sends nothing new (a
 * memory_first topic spills: no ack comes soon) and without it reads on
 * from where it stopped. Batches already sent are still acknowledged, so
 * the checkpoint and the order are the ones an unpaused topic would have.
 */
#include "replicator/rep_int.h"

int rep_engine_pause(rep_engine_t *e, size_t topic, bool paused)
{
    if (!e || topic >= e->ntopics)
        return TB_EINVALID;
    int n = 0;
    for (size_t i = 0; i < e->nouts; i++) {
        rep_output_t *o = e->outs[i];
        if (topic >= o->nlanes || !o->lanes[topic])
            continue;
        atomic_store(&o->lanes[topic]->paused, paused);
        rep__output_kick(o, topic); /* to its thread: pump now, with the flag as it is */
        n++;
    }
    return n;
}

bool rep_engine_paused(const rep_engine_t *e, size_t topic)
{
    if (!e || topic >= e->ntopics)
        return false;
    for (size_t i = 0; i < e->nouts; i++) {
        const rep_output_t *o = e->outs[i];
        if (topic < o->nlanes && o->lanes[topic] && atomic_load(&o->lanes[topic]->paused))
            return true;
    }
    return false;
}
