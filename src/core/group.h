// Groups (collieGroupStart / collieGroupEnd): the calls a thread makes between them are kept,
// then run together when the outermost group ends.
#pragma once

#include "algorithms/algorithm.h"
#include "src/core/p2p.h"

namespace collie {

class CommImpl;

// Whether this thread is inside a group.
bool inGroup();
// Group nesting on this thread.
void groupStart();
// Ends a group level; the outermost runs what the group holds.
Status groupEnd();
// Keep a collective / a point-to-point call of comm for the group's end.
void groupAdd(CommImpl* comm, const CollArgs& args);
void groupAdd(CommImpl* comm, const P2PCall& call);
// Runs calls on comm at once, as a group of their own (a blocking send or receive).
Status runP2PNow(CommImpl* comm, const P2PCall& call);

}  // namespace collie
