/*
 * mailbox.c: the thread boundary. A locked intrusive FIFO and one wake-up,
 * signalled only when the list goes from empty to non-empty; the receiver
 * splices the whole list out under the lock. A node handed over belongs to
 * the receiver.
 */
#include "base/base.h"

void tb_mbox_init(tb_mbox_t *mb, void (*wake)(void *arg), void *wake_arg)
{
    pthread_mutex_init(&mb->mu, NULL);
    mb->head = mb->tail = NULL;
    mb->wake = wake;
    mb->wake_arg = wake_arg;
}

void tb_mbox_destroy(tb_mbox_t *mb)
{
    pthread_mutex_destroy(&mb->mu);
}

void tb_mbox_push(tb_mbox_t *mb, tb_mnode_t *node)
{
    node->next = NULL;
    pthread_mutex_lock(&mb->mu);
    bool was_empty = mb->head == NULL;
    if (was_empty)
        mb->head = node;
    else
        mb->tail->next = node;
    mb->tail = node;
    pthread_mutex_unlock(&mb->mu);
    if (was_empty && mb->wake)
        mb->wake(mb->wake_arg);
}

tb_mnode_t *tb_mbox_take(tb_mbox_t *mb)
{
    pthread_mutex_lock(&mb->mu);
    tb_mnode_t *list = mb->head;
    mb->head = mb->tail = NULL;
    pthread_mutex_unlock(&mb->mu);
    return list;
}
