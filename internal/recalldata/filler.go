package recalldata

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// messages is how many messages History holds: the families' and the
// filler's, before the daily log's line a day.
const messages = 3300

// pools are the filler's slot values, one drawn per thread and slot.
var pools = map[string][]string{
	"child":    l("Lily", "Sam"),
	"activity": l("football", "piano", "swimming", "drama club", "Scouts", "netball", "chess club"),
	"grocery": l("milk", "bread", "eggs", "bananas", "dog food", "coffee", "cheese", "washing-up liquid", "bin bags", "loo roll",
		"pasta", "apples", "yoghurt", "butter", "teabags", "oat milk", "cat litter", "batteries"),
	"dish": l("lasagne", "fish pie", "stir fry", "chicken curry", "tacos", "jacket potatoes", "risotto", "sausage and mash", "roast chicken",
		"pizza", "leek soup", "chilli", "shepherd's pie", "pesto pasta"),
	"time":    l("5", "5:30", "6", "6:30", "7", "7:30", "8", "4:45"),
	"place":   l("the station", "school", "the park", "the shops", "Grandma's", "the leisure centre", "town", "the library"),
	"city":    l("Lisbon", "New York", "Sydney", "Tokyo", "Berlin", "Toronto"),
	"weather": l("sunny", "rain all day", "showers", "windy", "cloudy", "a thunderstorm later", "fog in the morning", "sunny spells"),
	"temp":    l("12", "14", "16", "17", "19", "21", "23", "25", "9", "7"),
	"task": l("call the dentist", "pay the window cleaner", "book the car in", "order more dog food", "email the school", "renew the parking permit",
		"water the tomatoes", "put the recycling out", "defrost the freezer", "check the tyre pressure", "take the parcel to the post office",
		"ring Grandma", "pick up the prescription", "move the car for the street cleaning", "sign Sam's trip form", "top up Lily's bus pass",
		"back up the laptop", "buy a birthday card", "book Biscuit's vet check", "cancel the milk delivery", "send the meter reading",
		"return the library books", "pay the dinner money", "charge the bike lights"),
	"when":    l("tomorrow at 8", "tonight at 7", "on Friday", "on Monday morning", "at 5pm", "in an hour", "on Saturday", "after school"),
	"fixture": l("boiler", "dishwasher", "fridge", "washing machine", "kitchen tap", "car", "router", "printer", "shower", "tumble dryer", "smoke alarm", "garage door", "toilet", "oven"),
	"noise":   l("making a weird noise", "leaking again", "beeping", "not working properly", "playing up", "really slow", "dripping", "clunking"),
	"trade":   l("plumber", "electrician", "gardener", "window cleaner", "boiler man", "Ocado driver", "piano tuner", "chimney sweep"),
	"bill":    l("electricity", "water", "council tax", "phone", "broadband", "gas", "TV licence"),
	"thing":   l("keys", "glasses", "phone charger", "blue scarf", "headphones", "wallet", "umbrella", "car keys", "passport"),
	"friend":  l("Maya", "Jack", "Olivia", "Noah", "Ava", "Leo", "Ruby"),
	"word":    l("necessary", "rhythm", "separate", "definitely", "embarrass", "occasionally", "conscientious"),
	"dayname": l("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
	"n":       l("12", "27", "48", "64", "85", "120", "156"),
	"event":   l("Grandma's visit", "the bake sale", "book club", "the school disco", "the boot fair", "Tom's five-a-side", "the street party", "the recycling centre run"),
	"topic":   l("the holiday money", "Christmas plans", "the car", "Lily's phone contract", "the garden", "the chores", "the loft", "Sam's birthday party"),
	"show":    l("the Bake Off final", "the new Attenborough", "the football", "Strictly", "the Traitors", "a film"),
	"hour":    l("3", "7", "11", "9", "1", "6"),
	"min":     l("05", "15", "30", "45", "50", "20"),
}

// threads are the filler: everyday exchanges that answer no question but
// share words with those that do (a tap dripping, a bill paid, the car
// booked in).
var threads = [][]step{
	{{who: "person", texts: l("Who's picking up {child} from {activity}?", "Can someone get {child} from {activity} at {time}?")}, {who: "other", after: "m", texts: l("I can, I'm out at {time} anyway", "Me", "I'll go")}},
	{{who: "person", texts: l("Running late, start dinner without me", "Stuck in traffic, back by {time}", "Train's delayed, sorry")}, {who: "other", after: "m", texts: l("ok", "no worries", "👍", "I'll keep a plate warm")}},
	{{who: "person", texts: l("Can someone buy {grocery} on the way home?", "We're out of {grocery}", "Mother, add {grocery} to the shopping list")}, {who: "mother", after: "m", texts: l("Added {grocery} to the shopping list.", "{grocery} is on the list.")}},
	{{who: "adult", texts: l("Dinner tonight is {dish}.", "Thinking {dish} for dinner?", "I'm doing {dish} tonight")}, {who: "child", after: "m", texts: l("yesss", "again??", "can we have pizza instead", "❤️")}},
	{{who: "person", texts: l("Mother, remind me to {task} {when}.", "Mother remind me {when} to {task}")}, {who: "mother", after: "m", texts: l("Reminder set: {task}, {when}.", "OK, I'll remind you {when} to {task}.")}, {who: "mother", after: "h", texts: l("Reminder: {task}.")}},
	{{who: "person", texts: l("Mother, what's the weather tomorrow?", "Mother, do I need a coat tomorrow?", "@mother weather for tomorrow?")}, {who: "mother", after: "m", texts: l("Tomorrow: {temp}°C and {weather}.", "{temp}°C tomorrow, {weather}.")}},
	{{who: "person", texts: l("The {fixture} is {noise}.", "Is it just me or is the {fixture} {noise}?", "The {fixture} is {noise} AGAIN")}, {who: "other", after: "m", texts: l("Again? I'll have a look at the weekend.", "Have you tried turning it off and on?", "I noticed that too", "We should get someone out")}},
	{{who: "person", texts: l("Is the {trade} still coming this week?", "Did the {trade} ever call back?", "What time is the {trade} due?")}, {who: "other", after: "h", texts: l("Think so, I'll check.", "No idea, ask Anna", "Not heard anything")}},
	{{who: "person", texts: l("Did anyone pay the {bill} bill?", "The {bill} bill is due next week", "Has the {bill} direct debit gone out?")}, {who: "other", after: "h", texts: l("Yes, last week.", "Not yet, I'll do it tonight", "It's on direct debit")}},
	{{who: "person", texts: l("The wifi is really slow tonight", "Internet's down again?", "Can't connect to the wifi upstairs")}, {who: "other", after: "m", texts: l("Lily's streaming again 😂", "Works for me", "I restarted the router")}},
	{{who: "person", texts: l("Can someone walk Biscuit? I'm stuck at work.", "Has Biscuit been out today?", "Biscuit needs a walk")}, {who: "other", after: "m", texts: l("On it.", "Took him round the park at lunch", "I'll take him after tea")}},
	{{who: "person", texts: l("Biscuit ate the {grocery} off the counter 🙄", "Biscuit rolled in something disgusting at the park", "Biscuit is barking at the postman again")}},
	{{who: "person", texts: l("Anyone seen my {thing}?", "Has anyone got my {thing}?")}, {who: "other", after: "m", texts: l("On the stairs", "In the car", "Nope", "Kitchen table")}},
	{{who: "child", texts: l("Can I go to {friend}'s after school?", "Can {friend} come for tea on {dayname}?")}, {who: "adult", after: "m", texts: l("Yes but home by {time}", "Ask your dad", "Not on a school night", "Fine")}},
	{{who: "adult", texts: l("{child} needs to be at {activity} by {time} tomorrow.", "{child}'s {activity} is cancelled today.", "{child} has {activity} kit to wash")}},
	{{who: "person", texts: l("Mother, how do you spell {word}?")}, {who: "mother", after: "m", texts: l("{word}")}},
	{{who: "person", texts: l("Mother, what's on the calendar {dayname}?", "Mother, what are we doing on {dayname}?")}, {who: "mother", after: "m", texts: l("{dayname}: {child} has {activity} at {time}; bins go out in the evening.", "{dayname}: {event}, then {child} at {activity}.")}},
	{{who: "mother", texts: l("Reminder: {task}.")}},
	{{who: "person", texts: l("Morning all", "Good morning!", "Night all", "Is anyone home?")}, {who: "other", after: "m", texts: l("morning", "👋", "night x", "me")}},
	{{who: "person", texts: l("Who finished the {grocery}??", "Who left the back door open?", "Whose mug is this in the lounge")}},
	{{who: "person", texts: l("Remember to put the bins out tonight", "Recycling week this week!")}, {who: "other", after: "h", texts: l("done", "on it", "it's not recycling this week")}},
	{{who: "person", texts: l("Mother, what time is it in {city}?")}, {who: "mother", after: "m", texts: l("It's {hour}:{min} in {city}.")}},
	{{who: "person", texts: l("Mother, add {event} to the calendar on {dayname}", "Mother, put {event} in the diary for {dayname}")}, {who: "mother", after: "m", texts: l("Added: {event}, {dayname}.", "{event} is in the calendar for {dayname}.")}},
	{{who: "person", texts: l("Can we talk about {topic} at dinner?", "We need to sort out {topic}")}, {who: "other", after: "m", texts: l("sure", "ok", "yes please")}},
	{{who: "person", texts: l("Anyone watching {show} tonight?", "{show} is on at 9")}, {who: "other", after: "m", texts: l("Yes! Save me a seat", "Not me, early night", "already watched it")}},
	{{who: "adult", texts: l("Mother, can you {ctask}?", "@mother please {ctask}")}, {who: "mother", after: "m", texts: l("Started chick {chick} to {ctask}.")}, {who: "chick", after: "h", texts: l("Chick {chick} finished: {cres}")}},
	{{who: "person", texts: l("Parcel came for you, it's in the porch", "The {trade} left a card, we missed them", "Bin men didn't come today")}},
	{{who: "child", texts: l("Can I have a lift to {place} at {time}?", "Mum can you get me from {place}?")}, {who: "adult", after: "m", texts: l("Yes", "Walk, it's not raining", "Ask Dad")}},
}

// chickJobs are the filler's chick errands: what was asked, what came back.
var chickJobs = [][2]string{
	{"make a meal plan for next week", "meal plan: {dish} Monday, leftovers Tuesday, stir fry Wednesday, {dish} again Friday."},
	{"resize the party photos", "resized {n} photos to 2048px for the family album."},
	{"check train times to Bath", "trains every 30 minutes; the 8:12 gets in at 9:40."},
	{"find a recipe for {dish}", "found 3 recipes for {dish}; the quickest takes 35 minutes."},
	{"tidy the shopping list", "grouped the shopping list by aisle: {n} items."},
	{"check the weekend weather", "Saturday {weather}, Sunday {temp}°C and dry."},
	{"rename the scanned receipts", "renamed {n} scanned receipts by date and shop."},
	{"find opening times for the tip", "the recycling centre is open 8–6 daily, closed Wednesdays."},
}

// filler adds everyday threads until the history holds about messages.
func (g *gen) filler() {
	for len(g.drafts) < messages-Days {
		th := threads[g.r.IntN(len(threads))]
		vals := map[string]string{}
		for _, k := range sortedKeys(pools) {
			vals[k] = g.pick(pools[k])
		}
		job := chickJobs[g.r.IntN(len(chickJobs))]
		g.chicks++
		var pairs []string
		for k, v := range vals {
			pairs = append(pairs, "{"+k+"}", v)
		}
		fill := strings.NewReplacer(pairs...)
		pairs = append(pairs, "{ctask}", fill.Replace(job[0]), "{cres}", fill.Replace(job[1]), "{chick}", fmt.Sprintf("c-%04d", 100+g.chicks))
		fill = strings.NewReplacer(pairs...)
		t := Start.Add(time.Duration(g.r.IntN(Days))*24*time.Hour + g.daytime())
		last := ""
		for _, s := range th {
			t = g.later(t, s.after)
			text := g.render(fill, g.pick(s.texts), t)
			var user, kind string
			switch s.who {
			case "mother":
				user, kind = "mother", "mother"
			case "chick":
				user, kind = fmt.Sprintf("c-%04d", 100+g.chicks), "chick"
			default:
				user, kind = g.speaker(s.who, last, text), "user"
				last = user
			}
			g.drafts = append(g.drafts, &draft{t: t, user: user, kind: kind, text: text})
		}
	}
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
